/* Finding and loading a runner plugin (runners/runner.h,
 * plan_runner_find): the CUDA runner is a shared library, dlopen'ed when it
 * is asked for, so the library and the tool never link CUDA.
 *
 * Nothing is cached here: every call asks the dynamic loader, which keeps
 * one copy of the plugin and counts its references. The plugin is never
 * closed: the vtable it returned points into it. */
#define _GNU_SOURCE /* dladdr */
#include "runner.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plugin_load.h"
#include "base/util.h"

#ifndef PLAN_PREFIX
#define PLAN_PREFIX "/usr/local"
#endif

#define PLAN_PLUGIN_DIRS 4

/* The folder of `path` (up to its last '/') into dir; false when none. */
static bool folder_of(const char *path, char *dir, size_t size) {
  const char *slash = strrchr(path, '/');
  if (!slash || (size_t)(slash - path) + 1 > size)
    return false;
  memcpy(dir, path, (size_t)(slash - path));
  dir[slash - path] = 0;
  if (!dir[0])
    strcpy(dir, "/");
  return true;
}

/* The folders to look in, in order, without repeats: beside the object
 * holding this code (libplan.so, or an executable linking libplan.a),
 * beside the running executable, the lib folder beside the executable's
 * (an installed bin/plan: ../lib, wherever the prefix was moved),
 * PREFIX/lib. Returns their count. */
static int search_dirs(char dirs[][PATH_MAX]) {
  int n = 0;
  char cand[PLAN_PLUGIN_DIRS][PATH_MAX];
  int nc = 0;
  Dl_info info;
  if (dladdr((void *)plan_runner_find, &info) && info.dli_fname &&
      folder_of(info.dli_fname, cand[nc], sizeof cand[nc]))
    nc++;
  char exe[PATH_MAX], bin[PATH_MAX];
  ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (len > 0) {
    exe[len] = 0;
    if (folder_of(exe, bin, sizeof bin)) {
      strcpy(cand[nc++], bin);
      int w = snprintf(cand[nc], PATH_MAX, "%s/../lib", bin);
      if (w > 0 && w < PATH_MAX)
        nc++;
    }
  }
  snprintf(cand[nc++], PATH_MAX, "%s/lib", PLAN_PREFIX);
  for (int i = 0; i < nc; i++) {
    /* a relative name from dladdr (a program started by a relative path)
     * is resolved against the working folder, as dlopen would */
    char real[PATH_MAX];
    const char *d = realpath(cand[i], real) ? real : cand[i];
    bool seen = false;
    for (int j = 0; j < n && !seen; j++)
      seen = !strcmp(dirs[j], d);
    if (!seen && strlen(d) < PATH_MAX)
      strcpy(dirs[n++], d);
  }
  return n;
}

/* Loads the plugin at `path` and asks its entry point for a vtable. */
static const plan_runner_vtable *load_at(const char *path, const char *runner,
                                         const char *file) {
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char *why = dlerror();
    plan_failf(PLAN_EUNSUPPORTED, "runner '%s': plugin %s does not load: %s",
               runner, path, why ? why : "unknown reason");
    return NULL;
  }
  plan_runner_plugin_entry_fn entry;
  /* POSIX's sanctioned conversion of a data pointer to a function */
  *(void **)(&entry) = dlsym(h, PLAN_RUNNER_PLUGIN_ENTRY);
  if (!entry) {
    dlclose(h);
    plan_failf(PLAN_EUNSUPPORTED,
               "runner '%s': %s has no entry point %s (not a %s plugin)",
               runner, path, PLAN_RUNNER_PLUGIN_ENTRY, file);
    return NULL;
  }
  const unsigned long long *abi = dlsym(h, PLAN_RUNNER_PLUGIN_ABI);
  if (!abi || *abi != PLAN_RUNNER_ABI_KEY) {
    dlclose(h); /* its entry point never ran: nothing to keep loaded */
    plan_failf(PLAN_EUNSUPPORTED,
               "runner '%s': plugin %s was built for another libplan (%s); "
               "rebuild it with `make %s`",
               runner, path,
               abi ? "its op kinds or layouts differ" : "it has no ABI key",
               runner);
    return NULL;
  }
  char err[512] = "";
  const plan_runner_vtable *vt =
      entry(PLAN_RUNNER_API_VERSION, err, sizeof err);
  if (!vt) {
    /* kept loaded: a CUDA runtime does not always unload cleanly */
    plan_failf(PLAN_EUNSUPPORTED, "runner '%s' cannot run here: %s", runner,
               err[0] ? err : "the plugin gave no reason");
    return NULL;
  }
  if (vt->api_version != PLAN_RUNNER_API_VERSION || !vt->supports_op ||
      !vt->run_op || !vt->name || strcmp(vt->name, runner)) {
    plan_failf(PLAN_EUNSUPPORTED,
               "runner '%s': plugin %s speaks runner API version %d as "
               "'%s', this library version %d; rebuild it with `make %s`",
               runner, path, vt->api_version, vt->name ? vt->name : "?",
               PLAN_RUNNER_API_VERSION, runner);
    return NULL;
  }
  return vt;
}

bool plan_plugin_find(const char *file, char *path, size_t size, char *looked,
                      size_t lsize) {
  char dirs[PLAN_PLUGIN_DIRS][PATH_MAX];
  int n = search_dirs(dirs);
  for (int i = 0; i < n; i++) {
    int len = snprintf(path, size, "%s/%s", dirs[i], file);
    if (len > 0 && (size_t)len < size && !access(path, F_OK))
      return true;
  }
  size_t used = 0;
  if (lsize)
    looked[0] = 0;
  for (int i = 0; i < n && used < lsize; i++)
    used += (size_t)snprintf(looked + used, lsize - used, "%s%s", i ? ", " : "",
                             dirs[i]);
  return false;
}

const plan_runner_vtable *
plan_runner_plugin_load(const char *runner, const char *file, const char *env) {
  const char *given = getenv(env);
  if (given && given[0]) {
    if (access(given, F_OK)) {
      plan_failf(PLAN_EUNSUPPORTED,
                 "runner '%s': plugin %s (from %s) not found; build it with "
                 "`make %s` (needs nvcc)",
                 runner, given, env, runner);
      return NULL;
    }
    return load_at(given, runner, file);
  }
  char path[PATH_MAX + 64], looked[PLAN_PLUGIN_DIRS * PATH_MAX + 64];
  if (plan_plugin_find(file, path, sizeof path, looked, sizeof looked))
    return load_at(path, runner, file);
  plan_failf(PLAN_EUNSUPPORTED,
             "runner '%s': plugin %s not found (looked in: %s; %s unset); "
             "build it with `make %s` (needs nvcc)",
             runner, file, looked, env, runner);
  return NULL;
}
