/* Reading a plan's `overlap` section (format 1.1, spec/plan-format.md
 * §4.8): a list of entries, each selecting collectives (an op's input, a
 * param's redistributions, a gradient's sync), their decomposition into
 * chunks, their stream and their start and wait points. Well-formedness
 * only: the patterns are resolved at lowering, against the lowered
 * program (lower_overlap.c), which plan_validate runs to report what they
 * select, in which order, at the entry's position. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "read/plan_read.h"

static const char *const entry_keys[] = {
    "input", "operand", "param", "grad_sync", "chunks",
    "dim",   "stream",  "start", "wait",      NULL};

#define OVERLAP_MAX_ENTRIES (1 << 20)
#define OVERLAP_MAX_CHUNKS 4096
#define OVERLAP_MAX_STREAMS 64

/* "ready", "after OP", "before OP" (start); "before OP", "end" (wait). */
static int read_point(const plan_reader *rd, const plan_ynode *n, bool start,
                      plan_ovl_point *pt, const char **op) {
  int rc = plan_rd_expect_scalar(rd, n, start ? "start" : "wait");
  if (rc)
    return rc;
  const char *s = n->u.scalar.text;
  const char *rest = NULL;
  if (start && !strcmp(s, "ready")) {
    *pt = PLAN_OVL_READY;
    return PLAN_OK;
  }
  if (!start && !strcmp(s, "end")) {
    *pt = PLAN_OVL_END;
    return PLAN_OK;
  }
  if (start && !strncmp(s, "after ", 6)) {
    *pt = PLAN_OVL_AFTER;
    rest = s + 6;
  } else if (!strncmp(s, "before ", 7)) {
    *pt = PLAN_OVL_BEFORE;
    rest = s + 7;
  }
  while (rest && *rest == ' ')
    rest++;
  if (!rest || !*rest || strlen(rest) > PLAN_MAX_NAME)
    return plan_rd_fail(rd, n, PLAN_ESCHEMA,
                        start ? "start must be 'ready', 'after OP' or 'before "
                                "OP', not '%.60s'"
                              : "wait must be 'before OP' or 'end', not "
                                "'%.60s'",
                        s);
  if (!(*op = plan_arena_strdup(rd->arena, rest)))
    return plan_oom();
  return PLAN_OK;
}

static int read_entry(const plan_reader *rd, const plan_ynode *n,
                      plan_overlap *e) {
  int rc;
  if ((rc = plan_rd_expect_map(rd, n, "an overlap entry")) ||
      (rc = plan_rd_check_keys(rd, n, entry_keys, "overlap entry", NULL)))
    return rc;
  memset(e, 0, sizeof *e);
  e->pos = plan_rd_pos(n);
  e->operand = -1;
  e->chunks = 1;
  e->dim = -1;
  e->stream = 1;
  e->start = e->wait = PLAN_OVL_IN_PLACE;
  static const char *const sel_keys[PLAN_OVL_SELECT_COUNT] = {"input", "param",
                                                              "grad_sync"};
  int nsel = 0;
  const plan_ynode *v;
  for (int k = 0; k < PLAN_OVL_SELECT_COUNT; k++) {
    if (!(v = plan_ymap_get(n, sel_keys[k])))
      continue;
    if (nsel++)
      return plan_rd_fail(rd, v, PLAN_ESCHEMA,
                          "an overlap entry selects by one of input, param "
                          "and grad_sync");
    e->select = (plan_ovl_select)k;
    if ((rc = plan_rd_name(rd, v,
                           k == PLAN_OVL_INPUT ? "an op name or pattern"
                                               : "a param name or pattern",
                           &e->pattern)))
      return rc;
  }
  if (!nsel)
    return plan_rd_fail(rd, n, PLAN_ESCHEMA,
                        "an overlap entry needs 'input' (an op), 'param' or "
                        "'grad_sync' (a param)");
  if ((v = plan_ymap_get(n, "operand"))) {
    int64_t x;
    if (e->select != PLAN_OVL_INPUT)
      return plan_rd_fail(rd, v, PLAN_ESCHEMA,
                          "'operand' goes with 'input' (an op's operand)");
    if ((rc = plan_rd_int(rd, v, "operand", &x)))
      return rc;
    if (x < 0 || x >= PLAN_MAX_OPERANDS)
      return plan_rd_fail(rd, v, PLAN_EINVALID, "operand must be 0 to %d",
                          PLAN_MAX_OPERANDS - 1);
    e->operand = (int)x;
  }
  if ((v = plan_ymap_get(n, "chunks"))) {
    if ((rc = plan_rd_int(rd, v, "chunks", &e->chunks)))
      return rc;
    if (e->chunks < 1 || e->chunks > OVERLAP_MAX_CHUNKS)
      return plan_rd_fail(rd, v, PLAN_EINVALID, "chunks must be 1 to %d",
                          OVERLAP_MAX_CHUNKS);
    e->chunks_pos = plan_rd_pos(v);
  }
  if ((v = plan_ymap_get(n, "dim"))) {
    int64_t x;
    if ((rc = plan_rd_int(rd, v, "dim", &x)))
      return rc;
    if (x < 0 || x >= PLAN_MAX_RANK)
      return plan_rd_fail(rd, v, PLAN_EINVALID, "dim must be 0 to %d",
                          PLAN_MAX_RANK - 1);
    if (!plan_ymap_get(n, "chunks"))
      return plan_rd_fail(rd, v, PLAN_ESCHEMA,
                          "'dim' is the dim 'chunks' split: give chunks");
    e->dim = (int)x;
  }
  if ((v = plan_ymap_get(n, "stream"))) {
    int64_t x;
    if ((rc = plan_rd_int(rd, v, "stream", &x)))
      return rc;
    if (x < 1 || x > OVERLAP_MAX_STREAMS)
      return plan_rd_fail(rd, v, PLAN_EINVALID,
                          "stream must be 1 to %d (0 is the compute stream)",
                          OVERLAP_MAX_STREAMS);
    e->stream = (int)x;
  }
  if ((v = plan_ymap_get(n, "start"))) {
    e->start_pos = plan_rd_pos(v);
    if ((rc = read_point(rd, v, true, &e->start, &e->start_op)))
      return rc;
  }
  if ((v = plan_ymap_get(n, "wait"))) {
    e->wait_pos = plan_rd_pos(v);
    if ((rc = read_point(rd, v, false, &e->wait, &e->wait_op)))
      return rc;
  }
  if (!e->start_pos.line)
    e->start_pos = e->pos;
  if (!e->wait_pos.line)
    e->wait_pos = e->pos;
  if (!e->chunks_pos.line)
    e->chunks_pos = e->pos;
  return PLAN_OK;
}

int plan_overlap_read(const plan_reader *rd, const plan_ynode *n,
                      plan_plan *p) {
  int rc;
  if ((rc = plan_rd_need_format_1_1(rd, n, "overlap")) ||
      (rc = plan_rd_expect_seq(rd, n, "overlap")))
    return rc;
  if (n->u.seq.count > OVERLAP_MAX_ENTRIES)
    return plan_rd_fail(rd, n, PLAN_ELIMIT, "more than %d overlap entries",
                        OVERLAP_MAX_ENTRIES);
  p->noverlap = (int)n->u.seq.count;
  p->overlap = plan_arena_alloc(rd->arena, sizeof(plan_overlap) *
                                               ((size_t)p->noverlap + 1));
  if (!p->overlap)
    return plan_oom();
  for (int i = 0; i < p->noverlap; i++)
    if ((rc = read_entry(rd, n->u.seq.items[i], &p->overlap[i])))
      return rc;
  return PLAN_OK;
}
