/* Loading a runner plugin (plugin_load.c). Internal to the library. */
#ifndef LIBPLAN_RUNNERS_PLUGIN_LOAD_H
#define LIBPLAN_RUNNERS_PLUGIN_LOAD_H

#include "runner.h"

/* The vtable of runner `runner` from the plugin `file` (a file name such as
 * "libplan-cuda.so"): the path in the environment variable `env` when set,
 * else the first `file` found beside this library (or the executable
 * linking it), beside the executable, in PREFIX/lib. NULL with the last
 * error set to PLAN_EUNSUPPORTED and the reason otherwise. */
const plan_runner_vtable *
plan_runner_plugin_load(const char *runner, const char *file, const char *env);

/* The path of plugin `file` in the folders plan_runner_plugin_load looks
 * in (beside this library or the executable linking it, beside the
 * executable, PREFIX/lib) into path; false, with the folders looked in
 * (comma-separated) in `looked`, when it is in none. */
bool plan_plugin_find(const char *file, char *path, size_t size, char *looked,
                      size_t lsize);

#endif
