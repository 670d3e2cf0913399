/* The `plan` command-line tool: shared helpers of the verbs. The tool is
 * built on the public API alone (libplan/libplan.h; `make
 * check-cli-public`); its own helpers are in util.h. */
#ifndef PLAN_CLI_H
#define PLAN_CLI_H

#include <stdbool.h>
#include <stdio.h>

#include "libplan/libplan.h"

/* Exit codes, the same for every verb. */
enum {
  EXIT_OK = 0,        /* ok / equal */
  EXIT_NEGATIVE = 1,  /* validation findings, differences found */
  EXIT_BAD_INPUT = 2, /* unreadable input or bad usage */
  EXIT_CANNOT_RUN = 3 /* the check cannot run here */
};

typedef struct cli_verb {
  const char *name;
  const char *summary;
  const char *usage; /* full --help text */
  int (*run)(int argc, char **argv);
} cli_verb;

/* Sends the ending signals to the main thread, so the library's writer
 * can hold them back while a temporary file exists (signals.c). Call
 * first in main. */
void cli_signals_init(void);

/* Prints the last libplan error as "plan: file:line:col: error: msg" and
 * returns EXIT_BAD_INPUT (or EXIT_CANNOT_RUN for PLAN_EUNSUPPORTED). */
int cli_fail_last(void);
/* The same for an error about `file`: named even when the library's
 * error names no file (out of memory while running it). */
int cli_fail_in(const char *file);
/* Prints a usage error for `verb` and returns EXIT_BAD_INPUT. */
int cli_usage(const char *verb, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* True when argv has -h or --help. */
bool cli_wants_help(int argc, char **argv);
/* The usage error of an unknown option of `verb`, with the nearest flags
 * its usage names (did-you-mean); returns EXIT_BAD_INPUT. */
int cli_unknown_option(const char *verb, const char *arg);
/* Prints findings, one per line: "file:line:col: severity: message [code]". */
void cli_print_diags(FILE *f, const plan_diags *d);
/* Prints findings as a JSON document (schema "libplan-findings/1"). */
void cli_print_diags_json(FILE *f, const plan_diags *d, const char *verdict);

/* Loads FILE when it is a lowered program: 1 with *out set; 0 when FILE is
 * something else (a plan or a program); -1 with the last error set when it
 * cannot be read or is a malformed lowered program. */
int cli_load_lowered(const char *file, plan_lowered **out);
/* Loads and validates a plan for a verb that runs it: EXIT_OK with *out
 * set; when it has error findings, prints them and "FILE: invalid (N
 * errors): not NOT_DONE" to f and returns EXIT_NEGATIVE; else the exit
 * code of the load or validation failure. */
int cli_load_valid(const char *file, FILE *f, const char *not_done,
                   plan_plan **out);
/* The same, not counting as errors the findings whose code starts with
 * `except` ("schedule."): a caller that reports those itself. */
int cli_load_valid_except(const char *file, FILE *f, const char *not_done,
                          const char *except, plan_plan **out);

int cmd_validate(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_search(int argc, char **argv);
int cmd_replay(int argc, char **argv);
extern const char usage_search[], usage_replay[];
int cmd_lower(int argc, char **argv);
int cmd_fmt(int argc, char **argv);
int cmd_hash(int argc, char **argv);
int cmd_show(int argc, char **argv);
int cmd_diff(int argc, char **argv);
int cmd_verify(int argc, char **argv);
int cmd_schedule(int argc, char **argv);

extern const char usage_validate[], usage_fmt[], usage_hash[], usage_show[],
    usage_diff[], usage_verify[], usage_lower[], usage_schedule[], usage_run[];

/* plan upgrade (upgrade.c) */
int cmd_upgrade(int argc, char **argv);
extern const char usage_upgrade[];

/* plan cost (cost.c) */
int cmd_cost(int argc, char **argv);
extern const char usage_cost[];

#endif
