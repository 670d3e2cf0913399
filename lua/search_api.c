/* The search API (libplan/search.h): plan_search and plan_replay run the
 * search driver (lua/search.lua, embedded) in a Lua state of their own,
 * made and closed within the call (lua_host.h), and turn its result table
 * into C: the plan taken out of its userdata, the numbers, the texts.
 *
 * Everything the call makes lives in its job (the caller's frame), which
 * is emptied whether or not the driver raised: nothing malloc'd is held in
 * a C local across a Lua call that can raise. The last error is set only
 * once the state is closed, from what the job recorded. */
#include <lauxlib.h>
#include <lua.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libplan/search.h"
#include "lua_host.h"
#include "lua_sources.h"
#include "plan_module_internal.h"
#include "sandbox.h"

/* One call: the request, then its outcome, owned here until handed over. */
typedef struct job {
  bool replay;
  const char *path; /* a file, or NULL: text[0..len) */
  const char *text, *name, *base_dir;
  size_t len;
  bool is_plan; /* the input has a mesh (search) */
  const plan_search_options *opts;
  const plan_replay_options *ropts;
  /* replay with trust_embedded_script: a state with the sandbox's
   * allocator, whose limits the driver starts before it loads the
   * embedded script into the sandbox's environment */
  bool sandboxed;
  plan_lua_sandbox box;
  /* the failure: code, and the last error to set once the state is gone */
  int code;
  bool oom; /* a copy out of the state failed */
  char message[1024], file[512];
  int line, column;
  /* what the driver said */
  bool ran;
  char *notes, *details;
  plan_plan *plan;
  double step, memory, seconds;
  bool fits;
  int64_t evaluations;
  /* replay */
  bool same;
  plan_hash recorded, replayed;
  char *strategy, *diff, *note;
} job;

static void job_free(job *j) {
  free(j->notes);
  free(j->details);
  free(j->strategy);
  free(j->diff);
  free(j->note);
  plan_free(j->plan);
}

/* A copy of s owned by the job's caller; NULL (and the job's oom set) when
 * memory is gone. Never raises. */
static char *copy_text(job *j, const char *s) {
  char *d = s ? strdup(s) : NULL;
  if (s && !d)
    j->oom = true;
  return d;
}

static void set_failure(job *j, int code, const char *file, int line,
                        int column, const char *msg) {
  j->code = code;
  snprintf(j->file, sizeof j->file, "%s", file ? file : "");
  snprintf(j->message, sizeof j->message, "%s", msg ? msg : "");
  j->line = line;
  j->column = column;
}

/* The length of the "FILE" of a Lua error's "FILE:LINE: message" (its
 * position), with *line set; 0 when the message starts with none. */
static size_t position(const char *m, int *line) {
  for (size_t i = 0; m[i] && m[i] != '\n'; i++) {
    if (m[i] != ':')
      continue;
    size_t k = i + 1;
    long v = 0;
    while (m[k] >= '0' && m[k] <= '9' && v < 100000000)
      v = v * 10 + (m[k++] - '0');
    if (i > 0 && k > i + 1 && m[k] == ':' && m[k + 1] == ' ') {
      *line = (int)v;
      return i;
    }
    if (m[i + 1] == ' ') /* "word: ...": no position */
      return 0;
  }
  return 0;
}

/* The failure `code` with the message msg, its position taken from the
 * front of `at` when it has one (then the message is the rest of at). */
static void fail_at(job *j, int code, const char *msg, const char *at) {
  int line = 0;
  size_t n = at ? position(at, &line) : 0;
  if (!n) {
    set_failure(j, code, NULL, 0, 0, msg);
    return;
  }
  char file[512];
  snprintf(file, sizeof file, "%.*s", (int)(n < 511 ? n : 511), at);
  const char *rest = at + n + 1;
  while (*rest >= '0' && *rest <= '9')
    rest++;
  set_failure(j, code, file, line, 0, rest + 2);
}

static const char *driver_source(void) {
  for (int i = 0; plan_lua_sources[i].name; i++)
    if (!strcmp(plan_lua_sources[i].name, "search"))
      return plan_lua_sources[i].text;
  return NULL;
}

/* ---- the request --------------------------------------------------------- */

static void set_string(lua_State *L, const char *key, const char *v) {
  if (!v)
    return;
  lua_pushstring(L, v);
  lua_setfield(L, -2, key);
}

/* The driver's req.progress(what, done, total): the caller's callback
 * (the options at upvalue 1, borrowed for the call). */
static int progress_fn(lua_State *L) {
  const plan_search_options *o = lua_touserdata(L, lua_upvalueindex(1));
  const char *what = luaL_optstring(L, 1, "");
  lua_Integer done = luaL_optinteger(L, 2, 0), total = luaL_optinteger(L, 3, 0);
  if (o && o->progress)
    o->progress(o->progress_ctx, what, (int64_t)done, (int64_t)total);
  return 0;
}

/* A positive option as a Lua integer (an integral number) or float. */
static void set_number(lua_State *L, const char *key, double v) {
  if (v <= 0)
    return;
  if (v < 9e15 && v == (double)(lua_Integer)v)
    lua_pushinteger(L, (lua_Integer)v);
  else
    lua_pushnumber(L, v);
  lua_setfield(L, -2, key);
}

static void push_request(lua_State *L, const job *j) {
  lua_createtable(L, 0, 16);
  if (j->path) {
    set_string(L, "path", j->path);
  } else {
    lua_pushlstring(L, j->text, j->len);
    lua_setfield(L, -2, "text");
    set_string(L, "name", j->name);
    set_string(L, "base_dir", j->base_dir);
  }
  lua_pushboolean(L, j->is_plan);
  lua_setfield(L, -2, "is_plan");
  if (j->ropts) {
    set_string(L, "script", j->ropts->strategy);
    lua_pushboolean(L, j->ropts->trust_embedded_script);
    lua_setfield(L, -2, "trust_embedded_script");
  }
  if (j->sandboxed) {
    lua_pushcfunction(L, plan_lua_sandbox_start_lua);
    lua_setfield(L, -2, "sandbox_start");
    lua_pushcfunction(L, plan_lua_sandbox_load);
    lua_setfield(L, -2, "sandbox_load");
  }
  const plan_search_options *o = j->opts;
  if (!o)
    return;
  set_string(L, "strategy", o->strategy);
  set_string(L, "mesh", o->mesh);
  set_string(L, "hardware", o->hardware);
  lua_pushinteger(L, (lua_Integer)o->seed);
  lua_setfield(L, -2, "seed");
  set_number(L, "width", o->width);
  set_number(L, "limit", (double)o->limit);
  set_number(L, "seconds", o->seconds);
  lua_pushboolean(L, o->devices);
  lua_setfield(L, -2, "devices");
  lua_pushboolean(L, o->self_contained);
  lua_setfield(L, -2, "self_contained");
  if (o->version < 2)
    return;
  lua_pushboolean(L, o->placement);
  lua_setfield(L, -2, "placement");
  set_string(L, "topology", o->topology);
  lua_pushboolean(L, o->mesh_shape);
  lua_setfield(L, -2, "mesh_shape");
  if (o->version < 3)
    return;
  lua_pushboolean(L, o->no_share);
  lua_setfield(L, -2, "no_share");
  if (o->progress) {
    lua_pushlightuserdata(L, (void *)o);
    lua_pushcclosure(L, progress_fn, 1);
    lua_setfield(L, -2, "progress");
  }
  if (o->version < 4)
    return;
  set_number(L, "joint_devices", o->joint_devices);
  set_number(L, "joint_hosts", o->joint_hosts);
}

/* ---- the outcome --------------------------------------------------------- */

/* `first` (when not NULL) and the strings of the list t[key], joined by
 * newlines, with one after the last when `trailing`; NULL when there is
 * nothing. The text stays on the stack. */
static const char *lines(lua_State *L, int t, const char *key,
                         const char *first, bool trailing) {
  luaL_Buffer b;
  int n = 0;
  lua_getfield(L, t, key);
  int list = lua_gettop(L);
  luaL_buffinit(L, &b);
  if (first) {
    luaL_addstring(&b, first);
    n++;
  }
  if (lua_istable(L, list)) {
    for (lua_Integer i = 1; lua_rawgeti(L, list, i) == LUA_TSTRING; i++) {
      if (n++)
        luaL_addchar(&b, '\n');
      luaL_addvalue(&b);
    }
    lua_pop(L, 1); /* the rawgeti's last value, not a string */
  }
  if (n && trailing)
    luaL_addchar(&b, '\n');
  luaL_pushresult(&b);
  lua_remove(L, list);
  return n ? lua_tostring(L, -1) : NULL;
}

static int status_of(const char *name) {
  static const struct {
    const char *name;
    int code;
  } codes[] = {{"io", PLAN_EIO},
               {"syntax", PLAN_ESYNTAX},
               {"invalid", PLAN_EINVALID},
               {"notfound", PLAN_ENOTFOUND},
               {"usage", PLAN_EUSAGE}};
  for (size_t i = 0; name && i < sizeof codes / sizeof *codes; i++)
    if (!strcmp(codes[i].name, name))
      return codes[i].code;
  return PLAN_EINVALID;
}

/* The driver raised: the strategy failed (or memory did). */
static void raised(lua_State *L, job *j, int rc) {
  const char *msg = plan_lua_host_message(L);
  if (rc == LUA_ERRMEM) {
    set_failure(j, PLAN_ENOMEM, NULL, 0, 0, "out of memory");
    return;
  }
  if (plan_lua_host_refused(L)) { /* cannot run here: no bug, no trace */
    set_failure(j, PLAN_EUNSUPPORTED, NULL, 0, 0, msg);
    return;
  }
  j->details = copy_text(j, msg);
  /* the last error: the message without its traceback */
  const char *tb = strstr(msg, "\nstack traceback:\n");
  lua_pushlstring(L, msg, tb ? (size_t)(tb - msg) : strlen(msg));
  const char *head = lua_tostring(L, -1);
  fail_at(j, PLAN_EINVALID, head, head);
  lua_pop(L, 1);
}

/* The driver's {error = ...}: input it could not use, or an invalid plan. */
static void refused(lua_State *L, job *j, int r) {
  lua_getfield(L, r, "error");
  lua_getfield(L, r, "code");
  lua_getfield(L, r, "at");
  const char *err = lua_tostring(L, -3), *code = lua_tostring(L, -2);
  const char *at = lua_tostring(L, -1);
  const plan_error *e = plan_error_last();
  if (code && !strcmp(code, "load") && e->code != PLAN_OK) /* the reader's */
    set_failure(j, e->code, e->file, e->line, e->column, e->message);
  else if (code && !strcmp(code, "load")) /* plan.new's mesh check */
    set_failure(j, PLAN_EUSAGE, NULL, 0, 0, err);
  else
    fail_at(j, status_of(code), err, at);
  j->details = copy_text(j, lines(L, r, "findings", err, false));
  lua_pop(L, 4);
}

static double field_number(lua_State *L, int t, const char *key) {
  lua_getfield(L, t, key);
  double v = lua_tonumber(L, -1);
  lua_pop(L, 1);
  return v;
}

static bool field_bool(lua_State *L, int t, const char *key) {
  lua_getfield(L, t, key);
  bool v = lua_toboolean(L, -1);
  lua_pop(L, 1);
  return v;
}

/* A string field copied out (NULL when absent). */
static char *field_string(lua_State *L, job *j, int t, const char *key) {
  lua_getfield(L, t, key);
  char *s = copy_text(j, lua_tostring(L, -1));
  lua_pop(L, 1);
  return s;
}

static void hash_field(lua_State *L, int t, const char *key, plan_hash *out) {
  lua_getfield(L, t, key);
  const char *s = lua_tostring(L, -1);
  if (!s || plan_hash_parse(out, s))
    memset(out, 0, sizeof *out);
  lua_pop(L, 1);
}

/* The driver's result at r: the numbers, the texts, then the plan. */
static void returned(lua_State *L, job *j, int r) {
  j->evaluations = (int64_t)field_number(L, r, "evaluations");
  j->seconds = field_number(L, r, "seconds");
  if (j->replay) {
    j->same = field_bool(L, r, "same");
    hash_field(L, r, "recorded", &j->recorded);
    hash_field(L, r, "replayed", &j->replayed);
    j->strategy = field_string(L, j, r, "strategy");
    j->note = field_string(L, j, r, "note");
    j->diff = copy_text(j, lines(L, r, "diff", NULL, true));
    lua_pop(L, 1);
  } else {
    j->step = field_number(L, r, "step");
    j->memory = field_number(L, r, "memory");
    j->fits = field_bool(L, r, "fits");
  }
  lua_getfield(L, r, "plan");
  lplan *lp = luaL_testudata(L, -1, PLAN_MT);
  if (!lp || !lp->p) {
    set_failure(j, PLAN_EINVALID, NULL, 0, 0,
                "search: the driver returned no plan");
    return;
  }
  j->plan = lp->p; /* the plan changes hands: its userdata is left closed */
  lp->p = NULL;
}

/* In protected mode: the libraries, the driver, the call, the outcome. */
static int job_main(lua_State *L) {
  job *j = lua_touserdata(L, 1);
  lua_setwarnf(L, NULL, NULL); /* warn() goes nowhere: the library prints
                                  nothing */
  plan_lua_host_open(L, false);
  lua_getglobal(L, "os"); /* a strategy may not end the caller's process */
  lua_pushnil(L);
  lua_setfield(L, -2, "exit");
  lua_pop(L, 1);
  const char *src = driver_source();
  if (!src || luaL_loadbuffer(L, src, strlen(src), "=search.lua") != LUA_OK)
    return luaL_error(L, "the search driver is not built in");
  lua_call(L, 0, 1);
  push_request(L, j);
  int req = lua_gettop(L);
  lua_getfield(L, req - 1, j->replay ? "replay" : "search");
  lua_pushvalue(L, req);
  int rc = plan_lua_host_pcall(L, 1, 1);
  j->ran = field_bool(L, req, "ran");
  if (rc != LUA_OK) {
    raised(L, j, rc);
    lua_pop(L, 1);
  } else if (lua_type(L, -1) != LUA_TTABLE) {
    set_failure(j, PLAN_EINVALID, NULL, 0, 0,
                "search: the driver returned no result");
  } else {
    lua_getfield(L, -1, "error");
    bool failed = !lua_isnil(L, -1);
    lua_pop(L, 1);
    if (failed)
      refused(L, j, lua_gettop(L));
    else
      returned(L, j, lua_gettop(L));
  }
  j->notes = copy_text(j, lines(L, req, "notes", NULL, true));
  return 0;
}

/* A sandboxed job that ran into a limit: the failure is the script's,
 * with the limit's message (a tripped limit may have reached the driver
 * as another error, and memory as Lua's own); true when so. */
static bool sandbox_failed(job *j, int rc) {
  char why[200];
  if (!j->box.active)
    return false;
  if (j->box.tripped)
    snprintf(why, sizeof why, "%s", j->box.why);
  else if (rc == LUA_ERRMEM || j->code == PLAN_ENOMEM ||
           strstr(j->message, "not enough memory"))
    snprintf(why, sizeof why, "the script ran past its memory limit of %d MiB",
             (int)(PLAN_LUA_SANDBOX_MEMORY >> 20));
  else
    return false;
  j->ran = true;
  if (!j->code || !strstr(j->message, why))
    set_failure(j, PLAN_EINVALID, NULL, 0, 0, why);
  j->code = PLAN_EINVALID;
  return true;
}

/* Runs the job; PLAN_OK, or its failure with the last error set. */
static int run(job *j) {
  char msg[1024];
  plan_error_clear();
  int rc;
  if (j->sandboxed) {
    plan_lua_sandbox_init(&j->box, "the script", NULL);
    rc = plan_lua_host_run_in(plan_lua_sandbox_newstate(&j->box), job_main, j,
                              msg, sizeof msg);
    if (rc != PLAN_LUA_HOST_NOSTATE && !j->oom && sandbox_failed(j, rc))
      return plan_error_set(j->code, j->file, j->line, j->column, "%s",
                            j->message);
  } else {
    rc = plan_lua_host_run(job_main, j, msg, sizeof msg);
  }
  if (rc == PLAN_LUA_HOST_NOSTATE || rc == LUA_ERRMEM || j->oom)
    return plan_error_set(PLAN_ENOMEM, NULL, 0, 0, "out of memory");
  if (rc != LUA_OK)
    return plan_error_set(PLAN_EINVALID, NULL, 0, 0, "search: %s", msg);
  if (j->code)
    return plan_error_set(j->code, j->file, j->line, j->column, "%s",
                          j->message);
  return PLAN_OK;
}

/* ---- options and info ---------------------------------------------------- */

int plan_search_options_init(plan_search_options *opts, unsigned int version) {
  if (!opts || version < 1 || version > PLAN_SEARCH_OPTIONS_VERSION)
    return plan_error_set(PLAN_EUSAGE, NULL, 0, 0,
                          "plan_search_options_init: %s",
                          opts ? "unknown version" : "NULL options");
  plan_search_options d = PLAN_SEARCH_OPTIONS_INIT;
  d.version = version;
  /* a version-1 struct ends at self_contained, a version-2 one at
   * mesh_shape, a version-3 one at progress_ctx */
  memcpy(opts, &d,
         version == 1   ? offsetof(plan_search_options, placement)
         : version == 2 ? offsetof(plan_search_options, no_share)
         : version == 3 ? offsetof(plan_search_options, joint_devices)
                        : sizeof d);
  return PLAN_OK;
}

int plan_search_info_init(plan_search_info *info, unsigned int version) {
  if (!info || version != PLAN_SEARCH_INFO_VERSION)
    return plan_error_set(PLAN_EUSAGE, NULL, 0, 0, "plan_search_info_init: %s",
                          info ? "unknown version" : "NULL info");
  plan_search_info d = PLAN_SEARCH_INFO_INIT;
  *info = d;
  return PLAN_OK;
}

void plan_search_info_clear(plan_search_info *info) {
  if (!info)
    return;
  unsigned int version = info->version;
  free(info->notes);
  free(info->details);
  plan_search_info d = PLAN_SEARCH_INFO_INIT;
  *info = d;
  info->version = version;
}

void plan_replay_result_free(plan_replay_result *r) {
  if (!r)
    return;
  free(r->strategy);
  free(r->diff);
  free(r->note);
  plan_free(r->plan);
  free(r);
}

/* The arguments every call shares; PLAN_OK or PLAN_EUSAGE. */
static int check_args(const void *out, plan_search_info *info,
                      const plan_search_options *opts, const char *fn) {
  if (!out)
    return plan_error_set(PLAN_EUSAGE, NULL, 0, 0, "%s: NULL out", fn);
  if (info && info->version != PLAN_SEARCH_INFO_VERSION)
    return plan_error_set(PLAN_EUSAGE, NULL, 0, 0,
                          "%s: unknown plan_search_info version %u", fn,
                          info->version);
  if (opts &&
      (opts->version < 1 || opts->version > PLAN_SEARCH_OPTIONS_VERSION))
    return plan_error_set(PLAN_EUSAGE, NULL, 0, 0,
                          "%s: unknown plan_search_options version %u", fn,
                          opts->version);
  plan_search_info_clear(info);
  return PLAN_OK;
}

/* Hands the job's texts to info (or frees them with the job). */
static void give_info(job *j, plan_search_info *info) {
  if (!info)
    return;
  info->strategy_ran = j->ran;
  info->notes = j->notes;
  info->details = j->details;
  j->notes = j->details = NULL;
  if (j->code || !j->plan)
    return;
  info->step_seconds = j->step;
  info->memory_bytes = j->memory;
  info->fits = j->fits;
  info->cost_evaluations = j->evaluations;
  info->seconds = j->seconds;
}

/* ---- search -------------------------------------------------------------- */

/* Feeds s[0..len) to the scan for a line that starts with "mesh:" (a
 * plan's top-level mesh); *k is its state, 1 at the start of the text.
 * True once found. */
static bool scan_mesh(const char *s, size_t len, size_t *k) {
  static const char pat[] = "\nmesh:";
  for (size_t i = 0; i < len; i++) {
    *k = s[i] == pat[*k] ? *k + 1 : s[i] == '\n' ? 1 : 0;
    if (*k == sizeof pat - 1)
      return true;
  }
  return false;
}

/* The same for a file: *is_plan, or PLAN_EIO. */
static int file_is_plan(const char *path, bool *is_plan) {
  /* plan_read_file: a regular file only (a FIFO is not waited on), capped */
  char *data = NULL;
  size_t len = 0, k = 1;
  int rc = plan_read_file(&data, &len, path, 0);
  if (rc)
    return rc;
  *is_plan = scan_mesh(data, len, &k);
  plan_buffer_free(data);
  return PLAN_OK;
}

/* A self-contained search's plan as its file is: written with the program
 * inline and read back (an embedded program of an older format version
 * takes the plan's, and so a new hash). */
static int embed(plan_plan **p) {
  plan_write_options w = PLAN_WRITE_OPTIONS_INIT;
  w.self_contained = 1;
  char *text;
  size_t len;
  int rc = plan_write_buffer(&text, &len, *p, &w);
  if (rc)
    return rc;
  plan_plan *q;
  rc = plan_load_buffer(&q, text, len, plan_file(*p), NULL);
  free(text);
  if (rc)
    return rc;
  plan_free(*p);
  *p = q;
  return PLAN_OK;
}

static int search_job(plan_plan **out, plan_search_info *info, job *j) {
  /* the joint search chooses a program's mesh itself (lua/search.lua) */
  bool joint = j->opts && j->opts->version >= 4 && j->opts->joint_devices > 0;
  if (!j->is_plan && !(j->opts && j->opts->mesh) && !joint)
    return plan_error_set(PLAN_EUSAGE, NULL, 0, 0,
                          "a program needs a mesh (e.g. dp=2,tp=4) to search");
  int rc = run(j);
  if (!rc && j->opts && j->opts->self_contained)
    rc = embed(&j->plan);
  give_info(j, info);
  if (!rc) {
    *out = j->plan;
    j->plan = NULL;
  }
  job_free(j);
  return rc;
}

int plan_search(plan_plan **out, plan_search_info *info, const char *path,
                const plan_search_options *opts) {
  if (out)
    *out = NULL;
  int rc = check_args(out, info, opts, "plan_search");
  if (rc)
    return rc;
  if (!path)
    return plan_error_set(PLAN_EUSAGE, NULL, 0, 0, "plan_search: NULL path");
  job j = {.path = path, .opts = opts};
  if ((rc = file_is_plan(path, &j.is_plan)))
    return rc;
  return search_job(out, info, &j);
}

int plan_search_buffer(plan_plan **out, plan_search_info *info,
                       const char *data, size_t len, const char *name,
                       const char *base_dir, const plan_search_options *opts) {
  if (out)
    *out = NULL;
  int rc = check_args(out, info, opts, "plan_search_buffer");
  if (rc)
    return rc;
  if (!data)
    return plan_error_set(PLAN_EUSAGE, NULL, 0, 0,
                          "plan_search_buffer: NULL data");
  size_t k = 1;
  job j = {.text = data,
           .len = len,
           .name = name ? name : "<memory>",
           .base_dir = base_dir ? base_dir : ".",
           .opts = opts};
  j.is_plan = scan_mesh(data, len, &k);
  return search_job(out, info, &j);
}

/* ---- replay -------------------------------------------------------------- */

static int replay_job(plan_replay_result **out, plan_search_info *info,
                      job *j) {
  int rc = run(j);
  give_info(j, info);
  if (rc) {
    job_free(j);
    return rc;
  }
  plan_replay_result *r = calloc(1, sizeof *r);
  if (!r) {
    job_free(j);
    return plan_error_set(PLAN_ENOMEM, NULL, 0, 0, "out of memory");
  }
  r->same = j->same;
  r->recorded = j->recorded;
  r->replayed = j->replayed;
  r->strategy = j->strategy;
  r->diff = j->diff;
  r->note = j->note;
  r->plan = j->plan;
  j->strategy = j->diff = j->note = NULL;
  j->plan = NULL;
  job_free(j);
  *out = r;
  return PLAN_OK;
}

int plan_replay_options_init(plan_replay_options *opts, unsigned int version) {
  if (!opts || version != PLAN_REPLAY_OPTIONS_VERSION)
    return plan_error_set(PLAN_EUSAGE, NULL, 0, 0,
                          "plan_replay_options_init: %s",
                          opts ? "unknown version" : "NULL options");
  plan_replay_options d = PLAN_REPLAY_OPTIONS_INIT;
  *opts = d;
  return PLAN_OK;
}

/* The replay options' version; PLAN_OK or PLAN_EUSAGE. */
static int check_replay_options(const plan_replay_options *opts,
                                const char *fn) {
  if (opts && opts->version != PLAN_REPLAY_OPTIONS_VERSION)
    return plan_error_set(PLAN_EUSAGE, NULL, 0, 0,
                          "%s: unknown plan_replay_options version %u", fn,
                          opts->version);
  return PLAN_OK;
}

int plan_replay_ext(plan_replay_result **out, plan_search_info *info,
                    const char *path, const plan_replay_options *opts) {
  if (out)
    *out = NULL;
  int rc = check_args(out, info, NULL, "plan_replay");
  if (!rc)
    rc = check_replay_options(opts, "plan_replay");
  if (rc)
    return rc;
  if (!path)
    return plan_error_set(PLAN_EUSAGE, NULL, 0, 0, "plan_replay: NULL path");
  job j = {.replay = true, .path = path, .is_plan = true, .ropts = opts};
  j.sandboxed = opts && opts->trust_embedded_script && !opts->strategy;
  return replay_job(out, info, &j);
}

int plan_replay_buffer_ext(plan_replay_result **out, plan_search_info *info,
                           const char *data, size_t len, const char *name,
                           const char *base_dir,
                           const plan_replay_options *opts) {
  if (out)
    *out = NULL;
  int rc = check_args(out, info, NULL, "plan_replay_buffer");
  if (!rc)
    rc = check_replay_options(opts, "plan_replay_buffer");
  if (rc)
    return rc;
  if (!data)
    return plan_error_set(PLAN_EUSAGE, NULL, 0, 0,
                          "plan_replay_buffer: NULL data");
  job j = {.replay = true,
           .text = data,
           .len = len,
           .name = name ? name : "<memory>",
           .base_dir = base_dir ? base_dir : ".",
           .is_plan = true,
           .ropts = opts};
  j.sandboxed = opts && opts->trust_embedded_script && !opts->strategy;
  return replay_job(out, info, &j);
}

int plan_replay(plan_replay_result **out, plan_search_info *info,
                const char *path) {
  return plan_replay_ext(out, info, path, NULL);
}

int plan_replay_buffer(plan_replay_result **out, plan_search_info *info,
                       const char *data, size_t len, const char *name,
                       const char *base_dir) {
  return plan_replay_buffer_ext(out, info, data, len, name, base_dir, NULL);
}
