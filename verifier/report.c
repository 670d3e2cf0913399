/* Machine-readable verification reports: JSON and YAML (schema
 * "libplan-verify/1", the same fields in both) and JUnit XML for CI. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "verify_int.h"

#define SCHEMA "libplan-verify/1"

static void json_str(plan_buf *b, const char *s) {
  plan_buf_quoted(b, s);
}

/* Numbers: shortest round-trip spelling; non-finite values as null. */
static void num(plan_buf *b, double v) {
  char buf[40];
  if (!isfinite(v))
    plan_buf_puts(b, "null");
  else
    plan_buf_puts(b, plan_format_double(v, buf));
}

static void xml_str(plan_buf *b, const char *s) {
  for (; s && *s; s++) {
    switch (*s) {
    case '&':
      plan_buf_puts(b, "&amp;");
      break;
    case '<':
      plan_buf_puts(b, "&lt;");
      break;
    case '>':
      plan_buf_puts(b, "&gt;");
      break;
    case '"':
      plan_buf_puts(b, "&quot;");
      break;
    case '\n':
      plan_buf_puts(b, "&#10;");
      break;
    default:
      if ((unsigned char)*s >= 0x20)
        plan_buf_putc(b, *s);
    }
  }
}

static const char *kinds[] = {"all_gather", "all_reduce", "reduce_scatter",
                              "all_to_all"};

/* JSON and YAML share one walk: YAML here is JSON's flow style inside
 * block mappings, which every YAML 1.2 reader reads. */
static void write_json(plan_buf *b, const plan_verify_report *r, bool yaml) {
  const char *nl = yaml ? "\n" : "";
  if (yaml)
    plan_buf_puts(b, "schema: " SCHEMA "\nplan: ");
  else
    plan_buf_puts(b, "{\"schema\": \"" SCHEMA "\", \"plan\": ");
  json_str(b, r->file);
  plan_buf_printf(b,
                  yaml ? "\nverdict: %s\nmode: %s\nseed: %llu\nrunner: "
                       : ", \"verdict\": \"%s\", \"mode\": \"%s\", "
                         "\"seed\": %llu, \"runner\": ",
                  r->equal ? "equal" : "not_equal",
                  r->mode == PLAN_VERIFY_EXACT ? "exact" : "float",
                  (unsigned long long)r->seed);
  json_str(b, r->runner);
  plan_buf_printf(b, yaml ? "\nranks: %lld\n" : ", \"ranks\": %lld",
                  (long long)r->ranks);
  plan_buf_puts(b, yaml ? "collectives: {" : ", \"collectives\": {");
  for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++)
    plan_buf_printf(b, "%s\"%s\": %d", k ? ", " : "", kinds[k],
                    plan_verify_report_collectives(r, kinds[k]));
  plan_buf_puts(b, yaml ? "}\nfirst_divergent: " : "}, \"first_divergent\": ");
  if (r->equal) {
    plan_buf_puts(b, "null");
  } else {
    plan_buf_puts(b, "{\"op\": ");
    json_str(b, r->first_op);
    plan_buf_puts(b, ", \"tensor\": ");
    json_str(b, r->first_tensor);
    plan_buf_puts(b, ", \"diagnosis\": ");
    json_str(b, r->diagnosis);
    plan_buf_putc(b, '}');
  }
  plan_buf_puts(b, yaml ? "\ntensors:" : ", \"tensors\": [");
  for (int i = 0; i < r->nrecs; i++) {
    const plan_vrecord *v = &r->recs[i];
    plan_buf_puts(b, yaml ? "\n  - {\"kind\": "
                     : i  ? ",\n  {\"kind\": "
                          : "\n  {\"kind\": ");
    json_str(b, v->what);
    plan_buf_puts(b, ", \"op\": ");
    json_str(b, v->op);
    plan_buf_puts(b, ", \"tensor\": ");
    json_str(b, v->tensor);
    plan_buf_puts(b, ", \"placement\": ");
    json_str(b, v->placement);
    plan_buf_puts(b, ", \"dtype\": ");
    json_str(b, v->dtype);
    if (v->step)
      plan_buf_printf(b, ", \"step\": %d", v->step);
    plan_buf_printf(b, ", \"compared\": %lld, \"mismatches\": %lld",
                    (long long)v->compared, (long long)v->mismatches);
    if (v->mismatches) {
      plan_buf_puts(b, ", \"max_abs_error\": ");
      num(b, v->max_abs);
      plan_buf_puts(b, ", \"max_rel_error\": ");
      num(b, v->max_rel);
      plan_buf_printf(b, ", \"at\": %lld, \"got\": ", (long long)v->at);
      num(b, v->got);
      plan_buf_puts(b, ", \"want\": ");
      num(b, v->want);
    }
    plan_buf_putc(b, '}');
  }
  if (yaml)
    plan_buf_puts(b, r->nrecs ? "\n" : " []\n");
  else
    plan_buf_printf(b, "%s]}\n", nl);
}

static void write_junit(plan_buf *b, const plan_verify_report *r) {
  int failures = 0;
  for (int i = 0; i < r->nrecs; i++)
    failures += r->recs[i].mismatches > 0;
  plan_buf_puts(b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                   "<testsuites>\n  <testsuite name=\"plan verify ");
  xml_str(b, r->file);
  plan_buf_printf(b, "\" tests=\"%d\" failures=\"%d\">\n", r->nrecs, failures);
  for (int i = 0; i < r->nrecs; i++) {
    const plan_vrecord *v = &r->recs[i];
    plan_buf_puts(b, "    <testcase classname=\"");
    xml_str(b, r->file);
    plan_buf_puts(b, "\" name=\"");
    xml_str(b, v->op);
    plan_buf_puts(b, ": ");
    xml_str(b, v->tensor);
    if (v->step)
      plan_buf_printf(b, " (step %d)", v->step);
    plan_buf_puts(b, "\"");
    if (!v->mismatches) {
      plan_buf_puts(b, "/>\n");
      continue;
    }
    plan_buf_printf(b,
                    ">\n      <failure message=\"%lld of %lld elements "
                    "differ\">largest abs error %g at %lld (got %.17g, "
                    "want %.17g)",
                    (long long)v->mismatches, (long long)v->compared,
                    v->max_abs, (long long)v->at, v->got, v->want);
    if (!strcmp(v->op, r->first_op) && !strcmp(v->tensor, r->first_tensor) &&
        r->diagnosis[0]) {
      plan_buf_puts(b, "; first divergence; ");
      xml_str(b, r->diagnosis);
    }
    plan_buf_puts(b, "</failure>\n    </testcase>\n");
  }
  plan_buf_puts(b, "  </testsuite>\n</testsuites>\n");
}

int plan_verify_report_write(char **out, size_t *len,
                             const plan_verify_report *r, const char *format) {
  *out = NULL;
  plan_buf b;
  plan_buf_init(&b);
  if (!strcmp(format, "text"))
    plan_buf_puts(&b, r->text);
  else if (!strcmp(format, "json"))
    write_json(&b, r, false);
  else if (!strcmp(format, "yaml"))
    write_json(&b, r, true);
  else if (!strcmp(format, "junit"))
    write_junit(&b, r);
  else
    return plan_failf(PLAN_EUSAGE,
                      "report format '%s' is not text, yaml, json or junit",
                      format);
  return plan_buf_take(&b, out, len);
}
