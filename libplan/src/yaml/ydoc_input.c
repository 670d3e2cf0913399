/* The input of the YAML tree builder (ydoc_state.h): whole files read with
 * the 1 GiB cap, libyaml's parser set up over UTF-8 text, its errors turned
 * into positioned messages, and the event-only scan of the load benchmark. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "yaml/ydoc_state.h"

/* ---- positions and messages ---------------------------------------------- */

/* Converts a byte offset into the input to a 1-based line and column, the
 * way libyaml counts them (columns in characters; CR, LF, CRLF, NEL, LS and
 * PS end lines). libyaml gives only a byte offset for reader errors (bad
 * UTF-8, control characters), and the bytes before it are valid UTF-8. */
static void offset_pos(const char *d, size_t len, size_t off, int *line,
                       int *col) {
  const unsigned char *s = (const unsigned char *)d;
  size_t l = 1, c = 1, i = 0;
  if (off > len)
    off = len;
  while (i < off) {
    unsigned char ch = s[i];
    size_t brk = 0;
    if (ch == '\r')
      brk = (i + 1 < len && s[i + 1] == '\n') ? 2 : 1;
    else if (ch == '\n')
      brk = 1;
    else if (ch == 0xC2 && i + 1 < len && s[i + 1] == 0x85)
      brk = 2;
    else if (ch == 0xE2 && i + 2 < len && s[i + 1] == 0x80 &&
             (s[i + 2] == 0xA8 || s[i + 2] == 0xA9))
      brk = 3;
    if (brk) {
      l++;
      c = 1;
      i += brk;
      continue;
    }
    if ((ch & 0xC0) != 0x80) /* count characters, not continuation bytes */
      c++;
    i++;
  }
  *line = l < (size_t)INT_MAX ? (int)l : INT_MAX;
  *col = c < (size_t)INT_MAX ? (int)c : INT_MAX;
}

/* Turns the libyaml parser error into the last error. */
int plan_yd_parser_error(const yaml_parser_t *p, const char *name,
                         const char *data, size_t len) {
  const char *problem = p->problem ? p->problem : "malformed YAML";
  if (p->error == YAML_MEMORY_ERROR)
    return plan_oom();
  if (p->error == YAML_READER_ERROR) {
    int line, col;
    offset_pos(data, len, p->problem_offset, &line, &col);
    if (p->problem_value < 0)
      return plan_fail(PLAN_ESYNTAX, name, line, col, "%s", problem);
    /* libyaml's value is the offending byte for UTF-8 octet problems and
     * the decoded character otherwise. */
    if (strstr(problem, "octet"))
      return plan_fail(PLAN_ESYNTAX, name, line, col, "%s (byte 0x%02X)",
                       problem, (unsigned)p->problem_value);
    return plan_fail(PLAN_ESYNTAX, name, line, col, "%s (U+%04X)", problem,
                     (unsigned)p->problem_value);
  }
  if (p->context)
    return plan_fail(PLAN_ESYNTAX, name, mark_line(p->problem_mark),
                     mark_col(p->problem_mark), "%s (%s)", problem, p->context);
  return plan_fail(PLAN_ESYNTAX, name, mark_line(p->problem_mark),
                   mark_col(p->problem_mark), "%s", problem);
}

/* ---- input --------------------------------------------------------------- */

/* Reads a whole file (capped at YD_MAX_INPUT) into a malloc'd buffer:
 * plan_read_file's checks (regular files only, never blocking on open). */
int plan_yd_read_file(const char *path, char **out, size_t *outlen) {
  if (out)
    *out = NULL;
  if (outlen)
    *outlen = 0;
  if (!path)
    return plan_failf(PLAN_EUSAGE, "file path is NULL");
  return plan_read_file(out, outlen, path, YD_MAX_INPUT);
}

/* Prepares a parser over data. The encoding is fixed to UTF-8 (plans are
 * UTF-8; libyaml would otherwise switch to UTF-16 on a BOM, and its byte
 * offsets would no longer match our line counting), and a UTF-8 BOM is
 * stripped here because a forced-encoding libyaml would count it as a
 * column. Returns PLAN_OK, or an error for UTF-16 input. */
int plan_yd_parser_open(yaml_parser_t *p, const char **data, size_t *len,
                        const char *name) {
  const unsigned char *s = (const unsigned char *)*data;
  if (*len >= 3 && s[0] == 0xEF && s[1] == 0xBB && s[2] == 0xBF) {
    *data += 3;
    *len -= 3;
  } else if (*len >= 2 && ((s[0] == 0xFF && s[1] == 0xFE) ||
                           (s[0] == 0xFE && s[1] == 0xFF))) {
    return plan_fail(PLAN_ESYNTAX, name, 1, 1,
                     "input is UTF-16; YAML input must be UTF-8");
  }
  if (*len > YD_MAX_INPUT)
    return plan_fail(PLAN_ELIMIT, name, 0, 0,
                     "input is larger than the 1 GiB limit");
  if (!yaml_parser_initialize(p))
    return plan_oom();
  yaml_parser_set_encoding(p, YAML_UTF8_ENCODING);
  /* libyaml asserts a non-NULL input even when it is empty. */
  yaml_parser_set_input_string(p, (const unsigned char *)(*len ? *data : ""),
                               *len);
  return PLAN_OK;
}

int plan_ydoc_scan_events(const char *path, size_t *nevents) {
  yaml_parser_t parser;
  const char *data;
  char *buf;
  size_t len, n = 0;
  int rc;

  if (nevents)
    *nevents = 0;
  if ((rc = plan_yd_read_file(path, &buf, &len)) != PLAN_OK)
    return rc;
  data = buf ? buf : "";
  if ((rc = plan_yd_parser_open(&parser, &data, &len, path)) != PLAN_OK) {
    free(buf);
    return rc;
  }
  for (;;) {
    yaml_event_t ev;
    yaml_event_type_t type;
    if (!yaml_parser_parse(&parser, &ev)) {
      rc = plan_yd_parser_error(&parser, path, data, len);
      break;
    }
    type = ev.type;
    yaml_event_delete(&ev);
    n++;
    if (type == YAML_STREAM_END_EVENT)
      break;
  }
  yaml_parser_delete(&parser);
  free(buf);
  if (rc == PLAN_OK && nevents)
    *nevents = n;
  return rc;
}
