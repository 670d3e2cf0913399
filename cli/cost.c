/* `plan cost`: the modeled step time of a plan, per op and per collective,
 * memory per device, and whether it fits (docs/cost.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "util.h"
#include "libplan/cost.h"

const char usage_cost[] =
    "usage: plan cost [--hardware NAME] [--calibration FILE]\n"
    "                 [--format text|json|yaml] [--set NAME=VALUE]... PLAN\n"
    "\n"
    "Prices PLAN's step with the cost model: every op on its local blocks\n"
    "(roofline with an efficiency and a per-kernel floor), every collective\n"
    "lowering inserts between producer and consumer placements and to the\n"
    "output placements (alpha-beta, ring or tree, on the links its group's\n"
    "devices span: inside a host or across hosts, from the mesh's device\n"
    "order and devices_per_host), gradient synchronisation and the optimizer\n"
    "when the plan trains, a pipeline's transfers and bubble; then memory per\n"
    "device (parameters, gradients, optimizer state, saved activations net of\n"
    "recomputation, in-flight microbatches) against the device's capacity.\n"
    "The plan is validated first.\n"
    "  --hardware NAME     a built-in profile: h100-sxm (h100), h200-sxm "
    "(h200),\n"
    "                      a100-80gb (a100), l4, tpu-v5e (v5e).\n"
    "                      Default: the plan's mesh.hardware, else h100-sxm\n"
    "  --calibration FILE  measured times that override the model "
    "(docs/cost.md)\n"
    "  --set NAME=VALUE    a model parameter: efficiency.matmul, .other, "
    ".memory,\n"
    "                      .link, kernel_floor, memory, memory_bandwidth,\n"
    "                      flops.DTYPE, intra_host.bandwidth, ...\n"
    "  --format F          text (default), json or yaml (schema "
    "libplan-cost/1)\n"
    "Exit: 0 the plan fits, 1 it does not fit (the reason on stderr) or is\n"
    "invalid, 2 unreadable input or bad usage.\n";

int cmd_cost(int argc, char **argv) {
  const char *file = NULL, *hw = NULL, *cal = NULL, *format = "text";
  const char *sets[64];
  int nsets = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if ((!strcmp(a, "--hardware") || !strcmp(a, "--calibration") ||
         !strcmp(a, "--format") || !strcmp(a, "--set")) &&
        i + 1 >= argc)
      return cli_usage("cost", "%s needs a value", a);
    if (!strcmp(a, "--hardware"))
      hw = argv[++i];
    else if (!strcmp(a, "--calibration"))
      cal = argv[++i];
    else if (!strcmp(a, "--format"))
      format = argv[++i];
    else if (!strcmp(a, "--set")) {
      if (nsets == (int)(sizeof sets / sizeof sets[0]))
        return cli_usage("cost", "too many --set options");
      sets[nsets++] = argv[++i];
    } else if (a[0] == '-' && a[1])
      return cli_unknown_option("cost", a);
    else if (file)
      return cli_usage("cost", "one plan at a time");
    else
      file = a;
  }
  if (!file)
    return cli_usage("cost", "no plan given");
  if (strcmp(format, "text") && strcmp(format, "json") &&
      strcmp(format, "yaml"))
    return cli_usage("cost", "unknown format '%s' (text, json or yaml)",
                     format);
  int hrc = hw ? cli_hardware_arg("cost", "--hardware", hw) : EXIT_OK;
  if (hrc)
    return hrc;
  plan_plan *p;
  int rc = cli_load_valid(file, stderr, "costed", &p);
  if (rc)
    return rc;
  plan_cost_model *m = NULL;
  plan_cost_report *r = NULL;
  char *text = NULL;
  size_t len = 0;
  if (plan_cost_model_new(&m, p, hw)) {
    rc = cli_fail_last();
    goto done;
  }
  for (int i = 0; i < nsets; i++) {
    const char *eq = strchr(sets[i], '=');
    char name[128];
    double v = 0;
    if (!eq || (size_t)(eq - sets[i]) >= sizeof name ||
        !cli_parse_real(eq + 1, strlen(eq + 1), &v)) {
      rc = cli_usage("cost", "--set wants NAME=NUMBER, not '%s'", sets[i]);
      goto done;
    }
    snprintf(name, sizeof name, "%.*s", (int)(eq - sets[i]), sets[i]);
    if (plan_cost_model_set(m, name, v)) {
      rc = cli_usage("cost", "--set %s: %s", sets[i],
                     plan_error_last()->message);
      goto done;
    }
  }
  if (cal && plan_cost_model_load_calibration(m, cal)) {
    rc = cli_fail_last();
    goto done;
  }
  if (plan_cost_plan(&r, m, p) ||
      plan_cost_report_write(&text, &len, r, format)) {
    rc = cli_fail_last();
    goto done;
  }
  if (fwrite(text, 1, len, stdout) != len) {
    rc = EXIT_BAD_INPUT;
    goto done;
  }
  rc = EXIT_OK;
  if (!plan_cost_report_fits(r)) {
    fprintf(stderr, "%s: %s\n", file, plan_cost_report_reason(r));
    rc = EXIT_NEGATIVE;
  }
done:
  plan_buffer_free(text);
  plan_cost_report_free(r);
  plan_cost_model_free(m);
  plan_free(p);
  return rc;
}
