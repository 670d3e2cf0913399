/* Opening the MPI communicator (runners/comm.h, plan_comm_mpi_open): the
 * plugin libplan-comm-mpi.so (runners/mpi/comm_mpi.c) dlopen'ed on first
 * use, so the library and the tool never link libmpi and a process that
 * never runs distributed never loads it. The plugin is never closed: MPI
 * stays initialized for the process, and its communicators point into
 * the plugin. Loaded RTLD_GLOBAL: Open MPI's components look up libmpi's
 * symbols in the global scope. */
#include "comm.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "libplan/plan.h"
#include "plugin_load.h"
#include "base/util.h"

#define MPI_PLUGIN "libplan-comm-mpi.so"
#define MPI_PLUGIN_ENV "PLAN_COMM_MPI_PLUGIN"

int plan_comm_under_mpi(void) {
  static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE",
                                     "PMIX_RANK", "PMI_RANK"};
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
    const char *v = getenv(vars[i]);
    if (v && v[0])
      return 1;
  }
  return 0;
}

int plan_comm_mpi_open(plan_comm **out, double timeout_s, char *err,
                       size_t errsz) {
  if (out)
    *out = NULL;
  /* no singleton MPI: a process no launcher started is told so */
  if (!plan_comm_under_mpi())
    return plan_errc(PLAN_EUSAGE, err, errsz,
                     "mpi: this process was not started by an MPI launcher "
                     "(mpirun, srun: none of OMPI_COMM_WORLD_SIZE, PMI_SIZE, "
                     "PMIX_RANK, PMI_RANK is set)");
  char path[PATH_MAX + 64], looked[4 * PATH_MAX + 64] = "";
  const char *given = getenv(MPI_PLUGIN_ENV);
  if (given && given[0]) {
    if (access(given, F_OK))
      return plan_errc(PLAN_EUNSUPPORTED, err, errsz,
                       "mpi: plugin %s (from %s) not found", given,
                       MPI_PLUGIN_ENV);
    snprintf(path, sizeof path, "%s", given);
  } else if (!plan_plugin_find(MPI_PLUGIN, path, sizeof path, looked,
                               sizeof looked)) {
    return plan_errc(PLAN_EUNSUPPORTED, err, errsz,
                     "mpi: plugin %s not found (looked in: %s; %s unset); "
                     "build it with `make` (needs libopenmpi-dev)",
                     MPI_PLUGIN, looked, MPI_PLUGIN_ENV);
  }
  void *h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
  if (!h) {
    const char *why = dlerror();
    return plan_errc(PLAN_EUNSUPPORTED, err, errsz,
                     "mpi: plugin %s does not load: %s", path,
                     why ? why : "unknown reason");
  }
  plan_comm_mpi_entry_fn entry;
  /* POSIX's sanctioned conversion of a data pointer to a function */
  *(void **)(&entry) = dlsym(h, PLAN_COMM_MPI_ENTRY);
  if (!entry)
    return plan_errc(PLAN_EUNSUPPORTED, err, errsz,
                     "mpi: %s has no entry point %s (not the MPI plugin)", path,
                     PLAN_COMM_MPI_ENTRY);
  return entry(PLAN_COMM_MPI_ABI, out, timeout_s, err, errsz);
}
