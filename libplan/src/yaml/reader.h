/* Schema-directed reading of a YAML tree: typed scalars, known-field checks
 * with the version policy, x- extension keys and generic values. Every error
 * names the file, line and column of the offending node. Shared by the
 * program, mesh and plan readers. */
#ifndef LIBPLAN_READER_H
#define LIBPLAN_READER_H

#include "ir/ir.h"
#include "yaml/yamldoc.h"

typedef struct plan_reader {
  const char *file;         /* for messages */
  int ver_major, ver_minor; /* the file's format version */
  plan_arena *arena;        /* where values read are copied */
  plan_pos ver_pos;         /* where the version was read (0: unknown) */
} plan_reader;

/* Sets the last error at `at` (NULL: no position) and returns code. */
int plan_rd_fail(const plan_reader *rd, const plan_ynode *at, int code,
                 const char *fmt, ...) PLAN_PRINTF(4, 5);

plan_pos plan_rd_pos(const plan_ynode *n);

int plan_rd_expect_map(const plan_reader *rd, const plan_ynode *n,
                       const char *what);
int plan_rd_expect_seq(const plan_reader *rd, const plan_ynode *n,
                       const char *what);
int plan_rd_expect_scalar(const plan_reader *rd, const plan_ynode *n,
                          const char *what);

/* A document's keys before its `libplan` version key: one that is not in
 * `known` (nor an `x-` key) means the file is not a libplan document at
 * all, said without quoting the key, since such a file may be anyone's
 * (a program path that names a secret). */
int plan_rd_check_doc_start(const plan_reader *rd, const plan_ynode *root,
                            const char *const *known);
/* Checks that every key of `map` is in `known` (NULL-terminated) or starts
 * with "x-"; x- entries are kept in *ext (when ext != NULL; else they are
 * skipped). An unknown key is PLAN_ESCHEMA, or PLAN_EVERSION when the file is
 * newer than this reader, naming the field and both versions. */
int plan_rd_check_keys(const plan_reader *rd, const plan_ynode *map,
                       const char *const *known, const char *what,
                       plan_ext **ext);

/* Typed scalars. `what` names the field in messages. */
int plan_rd_string(const plan_reader *rd, const plan_ynode *n, const char *what,
                   const char **out);
/* A name: non-empty, at most PLAN_MAX_NAME bytes, no control characters. */
int plan_rd_name(const plan_reader *rd, const plan_ynode *n, const char *what,
                 const char **out);
/* The same checks without copying the text. */
int plan_rd_check_name(const plan_reader *rd, const plan_ynode *n,
                       const char *what);
/* The nodes of a name list (a sequence, or one scalar), checked as names
 * and not copied: item i is (*items ? (*items)[i] : n). */
int plan_rd_name_nodes(const plan_reader *rd, const plan_ynode *n,
                       const char *what, const plan_ynode *const **items,
                       int *count);
int plan_rd_int(const plan_reader *rd, const plan_ynode *n, const char *what,
                int64_t *out);
/* A finite number (ints accepted); NaN and infinities are refused. */
int plan_rd_number(const plan_reader *rd, const plan_ynode *n, const char *what,
                   double *out);
int plan_rd_bool(const plan_reader *rd, const plan_ynode *n, const char *what,
                 bool *out);
/* A list of ints (a YAML sequence). *out is arena memory. */
int plan_rd_int_list(const plan_reader *rd, const plan_ynode *n,
                     const char *what, int64_t **out, int *count, int max);
/* A list of names; a single scalar is taken as a one-element list. */
int plan_rd_name_list(const plan_reader *rd, const plan_ynode *n,
                      const char *what, const char ***out, int *count);

/* Generic value (provenance, x- keys): plain scalars typed by YAML 1.2's
 * core schema; quoted ones are strings. */
int plan_rd_value(const plan_reader *rd, const plan_ynode *n, plan_value **out);

/* Table-driven enum lookup: index of `n`'s text in names[0..count), or an
 * error listing the accepted names. */
int plan_rd_enum(const plan_reader *rd, const plan_ynode *n, const char *what,
                 const char *const *names, int count, int *out);

#endif
