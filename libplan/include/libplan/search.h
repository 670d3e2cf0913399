/* libplan: searching a plan and replaying a search, in-process.
 *
 * A search starts from a program on a mesh, or from a plan (its pinned ops
 * keep their strategies, every other decision is made again), and runs a
 * strategy: a built-in (megatron, greedy, beam, dp, ilp, exhaustive) or a
 * Lua file returning function(p, opts) (docs/lua.md). The result carries
 * its provenance (strategy, script hash, options, seed, library version,
 * modeled cost), so a replay can make it again and compare the hashes; a
 * replay trusts nothing in the file (plan_replay_ext).
 * `plan search` and `plan replay` are these calls and some printing.
 *
 * Each call runs the Lua search driver in a Lua state of its own, made and
 * closed within the call: calls on different threads are independent, and
 * nothing stays behind. The library prints nothing: notes, findings and
 * tracebacks come back as text in plan_search_info.
 *
 * Only libplan-search.so.0 has these functions (they need Lua 5.4 and
 * CBC); it carries libplan-verify's too, so a program links one of the
 * libraries, never two (each has its own copy of the core and of the last
 * error). */
#ifndef LIBPLAN_SEARCH_H
#define LIBPLAN_SEARCH_H

#include "common.h"
#include "plan.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- options --------------------------------------------------------- */

/* The options of a search, as `plan search` takes them. Initialise with
 * PLAN_SEARCH_OPTIONS_INIT or plan_search_options_init. The strings are
 * borrowed for the call. A 0 or NULL field means the default. */
typedef struct plan_search_options {
  unsigned int version; /* PLAN_SEARCH_OPTIONS_VERSION */
  /* a built-in strategy's name, or the path of a Lua file (ending in
   * ".lua"); NULL: "greedy" */
  const char *strategy;
  /* the mesh of a program, "dp=2,tp=4"; a plan brings its own (a mesh
   * given with a plan is only recorded in the provenance) */
  const char *mesh;
  /* the hardware profile that prices the search ("h100", "h200",
   * "a100"); NULL: the plan's own, else h100 */
  const char *hardware;
  int64_t seed;       /* the strategies' only source of randomness */
  int width;          /* beam's width; 0: 8 */
  int64_t limit;      /* dp's most states per step (0: 64), exhaustive's most
                         combinations (0: 100000) */
  double seconds;     /* ilp's solver time limit; 0: 60 */
  int devices;        /* 1: also choose the device order (each order of the
                         mesh axes over the devices) by the modeled step */
  int self_contained; /* 1: record a file strategy's script in the
                         provenance, and return the plan with its program
                         inline (what `plan search --self-contained`
                         writes) */
  /* version 2 (a version-1 caller's struct ends above, and the search
   * reads none of these from it): */
  int placement;        /* 1: also choose the device assignment on the mesh's
                           topology (or `topology`) by the modeled step, after
                           the strategy: curves through the topology composed
                           with orders of the axes (docs/heterogeneous.md) */
  const char *topology; /* what-if topology for the placement and shape
                           searches: "torus:4x4", "torus:4x2:nowrap",
                           "levels:nvlink=4,ib" (docs/cli.md); NULL: the
                           mesh's */
  int mesh_shape;       /* 1: try every factorisation of the mesh's device count
                           over its axis names (sizes 1 allowed), run the
                           strategy on each and keep the least modeled step */
  /* version 3: */
  int no_share; /* 1: the exact strategies (dp, ilp) solve and price every
                   copy of a repeated layer on its own, instead of once per
                   layer (the same plan for dp, slower; for ilp the copies
                   no longer share their choices), and greedy and beam
                   price every op (the same plans, slower) */
  /* called as the search goes: `what` names the work ("units", "ops",
   * "solve"), done of total steps of it so far (total 0: unknown).
   * From the calling thread, within the call; the library prints
   * nothing, the caller decides what to show. NULL: none. */
  void (*progress)(void *ctx, const char *what, int64_t done, int64_t total);
  void *progress_ctx;
  /* version 4: */
  int joint_devices; /* > 0: the joint search (docs/lua.md): the mesh
                        over dp, fsdp, cp, tp and pp for this many devices, the
                        pipeline's stages, microbatches and recomputation,
                        and the recipe, chosen together by the modeled
                        step; `mesh` is then ignored */
  int joint_hosts;   /* the hosts the devices are on (0: 1); tp stays
                        within a host */
} plan_search_options;

#define PLAN_SEARCH_OPTIONS_VERSION 4
#define PLAN_SEARCH_OPTIONS_INIT                                               \
  {                                                                            \
    PLAN_SEARCH_OPTIONS_VERSION, NULL, NULL, NULL, 0, 0, 0, 0.0, 0, 0, 0,      \
        NULL, 0, 0, NULL, NULL, 0, 0                                           \
  }

/* Sets *opts to the defaults of `version` (1 to 4: an older struct is
 * filled only as far as its version has fields). PLAN_EUSAGE for a NULL
 * opts or a version this library does not know. */
PLAN_API int plan_search_options_init(plan_search_options *opts,
                                      unsigned int version);

/* ---- what a call says besides its result ----------------------------- */

/* Filled by plan_search and plan_replay when given (it may be NULL), on
 * success and on failure. Initialise with PLAN_SEARCH_INFO_INIT or
 * plan_search_info_init; release its text with plan_search_info_clear. */
typedef struct plan_search_info {
  unsigned int version; /* PLAN_SEARCH_INFO_VERSION, set by the caller */
  /* 1 once the strategy has started: a failure then is the strategy's (it
   * raised, returned no placements or made an invalid plan; `plan search`
   * exits 1); 0 when the input, the options or the strategy's file could
   * not be used (exit 2) */
  int strategy_ran;
  /* the plan found (plan_search only): its modeled step in seconds, peak
   * memory per device in bytes, and 1 when that fits the hardware */
  double step_seconds;
  double memory_bytes;
  int fits;
  int64_t cost_evaluations; /* cost-model evaluations the search made */
  double seconds;           /* the strategy's processor time */
  /* the strategy's notes, one per line, each ending in a newline ("dp:
   * note: ..."); NULL when none. Newly allocated. */
  char *notes;
  /* on failure, the whole story for a person, or NULL when the last error
   * says it all: a Lua error's message with its traceback, an invalid
   * plan's findings after the message. Newly allocated. */
  char *details;
} plan_search_info;

#define PLAN_SEARCH_INFO_VERSION 1
#define PLAN_SEARCH_INFO_INIT                                                  \
  { PLAN_SEARCH_INFO_VERSION, 0, 0.0, 0.0, 0, 0, 0.0, NULL, NULL }

/* Sets *info to an empty one of `version` (PLAN_EUSAGE as for options). */
PLAN_API int plan_search_info_init(plan_search_info *info,
                                   unsigned int version);
/* Frees notes and details and empties the info (its version kept). Accepts
 * NULL. */
PLAN_API void plan_search_info_clear(plan_search_info *info);

/* ---- search ---------------------------------------------------------- */

/* Searches a plan for the program or plan file at `path` (a file with a
 * top-level `mesh:` is a plan; a program needs opts->mesh). *out is the
 * plan found, with its provenance, as `plan search -o` writes it: saved
 * with plan_save (self_contained as in opts), it is that file, and its
 * plan hash is that file's. opts NULL: the defaults.
 * Fails with *out = NULL: the status of reading the input (the last error
 * with its file, line and column), PLAN_EUSAGE for bad options or a
 * program without a mesh, PLAN_ENOTFOUND for an unknown strategy name,
 * PLAN_EIO for a strategy file that cannot be read, PLAN_ESYNTAX for one
 * that does not compile, PLAN_EINVALID when the strategy fails (the last
 * error names the Lua file and line it raised at) or makes an invalid
 * plan, PLAN_ENOMEM. */
PLAN_API int plan_search(plan_plan **out, plan_search_info *info,
                         const char *path, const plan_search_options *opts);
/* The same from memory: `data` holds a plan, or a program (which then
 * comes out inline in the plan). `name` is used in messages; a program
 * path in a plan is resolved relative to `base_dir` (NULL: the current
 * directory). */
PLAN_API int plan_search_buffer(plan_plan **out, plan_search_info *info,
                                const char *data, size_t len, const char *name,
                                const char *base_dir,
                                const plan_search_options *opts);

/* ---- replay ---------------------------------------------------------- */

/* A replay: the recorded search made again. Owned by the caller. */
typedef struct plan_replay_result {
  int same;           /* 1: the plan made again has the recorded plan hash */
  plan_hash recorded; /* the plan's own plan hash */
  plan_hash replayed; /* the plan hash of the plan made again */
  char *strategy;     /* the strategy the provenance records */
  /* when not the same, the differences (plan_diff: "code: message"), one
   * per line, each ending in a newline; else NULL */
  char *diff;
  /* NULL, or a note: the strategy's script has changed since the plan was
   * made (its hash differs from the recorded one) */
  char *note;
  /* the plan made again, freed with the result; a caller that keeps it
   * sets this to NULL and frees it with plan_free */
  plan_plan *plan;
} plan_replay_result;

/* What a replay may run besides a built-in strategy: nothing in the plan
 * file is trusted. Initialise with PLAN_REPLAY_OPTIONS_INIT or
 * plan_replay_options_init; the string is borrowed for the call. */
typedef struct plan_replay_options {
  unsigned int version; /* PLAN_REPLAY_OPTIONS_VERSION */
  /* the Lua file to run for a plan made with a file strategy; its script
   * hash must equal the provenance's `script` (else PLAN_EINVALID). NULL:
   * none */
  const char *strategy;
  /* 1: run the script the provenance carries (`script_text`, what
   * --self-contained records) when no strategy file is named, in the
   * sandbox (docs/lua.md, "Replay"). 0: never run it (PLAN_EUSAGE) */
  int trust_embedded_script;
} plan_replay_options;

#define PLAN_REPLAY_OPTIONS_VERSION 1
#define PLAN_REPLAY_OPTIONS_INIT                                               \
  { PLAN_REPLAY_OPTIONS_VERSION, NULL, 0 }

/* Sets *opts to the defaults of `version` (PLAN_EUSAGE as for
 * plan_search_options_init). */
PLAN_API int plan_replay_options_init(plan_replay_options *opts,
                                      unsigned int version);

/* Makes the plan file at `path` again from its provenance: every decision
 * but the pinned regions' is cleared, the recorded strategy runs with the
 * recorded options and seed, and the plan hashes are compared. A
 * different plan is a success with same = 0. The strategy is a built-in
 * the provenance names; or, for a plan made with a file strategy, the
 * file opts->strategy names (its hash checked against the recorded one),
 * or with opts->trust_embedded_script the script the provenance carries,
 * run in the sandbox; nothing else from the file runs. opts NULL: the
 * defaults.
 * Fails with *out = NULL: the status of reading the plan, PLAN_ENOTFOUND
 * when its provenance records no search, PLAN_EUSAGE for a file strategy
 * neither named nor trusted, PLAN_EINVALID for a strategy file whose hash
 * is not the recorded one, the strategy's statuses as for plan_search
 * (PLAN_EINVALID, with info->strategy_ran, for a sandbox limit). */
PLAN_API int plan_replay_ext(plan_replay_result **out, plan_search_info *info,
                             const char *path, const plan_replay_options *opts);
/* The same for a plan in memory (name and base_dir as for
 * plan_search_buffer). */
PLAN_API int plan_replay_buffer_ext(plan_replay_result **out,
                                    plan_search_info *info, const char *data,
                                    size_t len, const char *name,
                                    const char *base_dir,
                                    const plan_replay_options *opts);
/* plan_replay_ext and plan_replay_buffer_ext with the default options: a
 * built-in strategy, or the failure above for a file strategy. */
PLAN_API int plan_replay(plan_replay_result **out, plan_search_info *info,
                         const char *path);
PLAN_API int plan_replay_buffer(plan_replay_result **out,
                                plan_search_info *info, const char *data,
                                size_t len, const char *name,
                                const char *base_dir);
/* Frees the result and what it holds. Accepts NULL. */
PLAN_API void plan_replay_result_free(plan_replay_result *r);

#ifdef __cplusplus
}
#endif
#endif
