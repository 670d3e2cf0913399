/* Unit tests for the search API (libplan/search.h): plan_search makes the
 * plan `plan search -o` writes (the same plan and provenance hashes, the
 * tool run beside this binary or named by $PLAN_TOOL), plan_replay says
 * whether the recorded search makes it again, and the failures come back
 * with their status, position and text. Each call makes and closes its
 * own Lua state: under ASan/LSan a state left behind is a leak. Run from
 * the repository root. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "libplan/libplan.h"
#include "libplan/search.h"

#define PROGRAM "examples/mlp-program.yaml"
#define MESH "dp=2,tp=2"

/* The plan tool ("" when none is found) and the test's folder. */
static char tool[4096];
static char tmp[64];

static void find_tool(const char *argv0) {
  const char *env = getenv("PLAN_TOOL");
  if (env && access(env, X_OK) == 0) {
    snprintf(tool, sizeof tool, "%s", env);
    return;
  }
  const char *slash = strrchr(argv0, '/');
  int dir = slash ? (int)(slash - argv0) : 1;
  snprintf(tool, sizeof tool, "%.*s/../plan", dir, slash ? argv0 : ".");
  if (access(tool, X_OK) != 0)
    tool[0] = '\0';
}

/* Runs the tool with args (NULL-terminated), its output discarded; the
 * exit status. */
static int run_tool(const char *const *args) {
  char *argv[16];
  int n = 0;
  argv[n++] = tool;
  for (; args[n - 1] && n < 15; n++)
    argv[n] = (char *)args[n - 1];
  argv[n] = NULL;
  pid_t pid = fork();
  if (pid == 0) {
    int null = open("/dev/null", O_WRONLY);
    dup2(null, 1);
    dup2(null, 2);
    execv(tool, argv);
    _exit(127);
  }
  int st = 0;
  assert_true(pid > 0);
  assert_int_equal(waitpid(pid, &st, 0), pid);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static char *path_in_tmp(const char *name) {
  static char buf[4][256];
  static int k;
  char *b = buf[k++ % 4];
  snprintf(b, sizeof buf[0], "%s/%s", tmp, name);
  return b;
}

static void write_text(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

static char *read_text(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *s = malloc((size_t)n + 1);
  assert_non_null(s);
  assert_int_equal(fread(s, 1, (size_t)n, f), (size_t)n);
  s[n] = '\0';
  fclose(f);
  *len = (size_t)n;
  return s;
}

static plan_hash hash_of(const plan_plan *p, plan_part part) {
  plan_hash h;
  assert_int_equal(plan_hash_part(&h, p, part), PLAN_OK);
  return h;
}

static plan_plan *load(const char *path) {
  plan_plan *p = NULL;
  int rc = plan_load(&p, path);
  if (rc)
    fail_msg("%s: %s", path, plan_error_last()->message);
  return p;
}

static plan_plan *search(const char *strategy, plan_search_info *info) {
  plan_search_options o = PLAN_SEARCH_OPTIONS_INIT;
  o.strategy = strategy;
  o.mesh = MESH;
  plan_plan *p = NULL;
  int rc = plan_search(&p, info, PROGRAM, &o);
  if (rc)
    fail_msg("search %s: %s", strategy, plan_error_last()->message);
  return p;
}

static void test_options_init(void **state) {
  (void)state;
  plan_search_options o;
  memset(&o, 0x5a, sizeof o);
  assert_int_equal(plan_search_options_init(&o, PLAN_SEARCH_OPTIONS_VERSION),
                   PLAN_OK);
  assert_int_equal(o.version, PLAN_SEARCH_OPTIONS_VERSION);
  assert_null(o.strategy);
  assert_null(o.mesh);
  assert_int_equal(o.width, 0);
  assert_int_equal(plan_search_options_init(&o, 99), PLAN_EUSAGE);
  assert_int_equal(plan_error_last()->code, PLAN_EUSAGE);
  assert_true(plan_error_last()->message[0]);
  assert_int_equal(plan_search_options_init(NULL, 1), PLAN_EUSAGE);
  plan_search_info info;
  assert_int_equal(plan_search_info_init(&info, PLAN_SEARCH_INFO_VERSION),
                   PLAN_OK);
  assert_null(info.notes);
  assert_int_equal(plan_search_info_init(&info, 0), PLAN_EUSAGE);
  plan_search_info_clear(NULL);
  plan_replay_result_free(NULL);
  /* a call refuses options or an info of an unknown version */
  plan_plan *p = (plan_plan *)&o;
  o.version = 99;
  assert_int_equal(plan_search(&p, NULL, PROGRAM, &o), PLAN_EUSAGE);
  assert_null(p);
  info.version = 7;
  assert_int_equal(plan_search(&p, &info, PROGRAM, NULL), PLAN_EUSAGE);
  assert_int_equal(plan_search(NULL, NULL, PROGRAM, NULL), PLAN_EUSAGE);
}

/* Version 4's joint search: a version-3 struct is filled only as far as
 * its fields go; on 8 devices in 2 hosts the 4-layer transformer gets a
 * mesh of 8 devices that fits, its provenance records the joint search,
 * and 8 devices on 3 hosts are the caller's mistake. */
static void test_joint(void **state) {
  (void)state;
  plan_search_options o;
  memset(&o, 0x5a, sizeof o);
  assert_int_equal(plan_search_options_init(&o, 3), PLAN_OK);
  assert_int_equal(o.joint_devices, 0x5a5a5a5a); /* past a version-3 struct */
  assert_int_equal(plan_search_options_init(&o, 4), PLAN_OK);
  assert_int_equal(o.joint_devices, 0);
  assert_int_equal(o.joint_hosts, 0);
  o.joint_devices = 8;
  o.joint_hosts = 2;
  plan_search_info info = PLAN_SEARCH_INFO_INIT;
  plan_plan *p = NULL;
  int rc = plan_search(&p, &info, "examples/transformer4-1f1b.plan.yaml", &o);
  if (rc)
    fail_msg("joint search: %s", plan_error_last()->message);
  assert_int_equal(plan_mesh_device_count(p), 8);
  assert_true(info.fits);
  assert_non_null(info.notes);
  assert_non_null(strstr(info.notes, "joint: megatron's best"));
  char *text = NULL;
  size_t len = 0;
  assert_int_equal(plan_write_buffer(&text, &len, p, NULL), PLAN_OK);
  assert_non_null(
      strstr(text, "    joint:\n      devices: 8\n      hosts: 2\n"));
  plan_buffer_free(text);
  plan_free(p);
  plan_search_info_clear(&info);
  o.joint_hosts = 3;
  p = NULL;
  assert_int_equal(
      plan_search(&p, &info, "examples/transformer4-1f1b.plan.yaml", &o),
      PLAN_EUSAGE);
  assert_null(p);
  assert_non_null(strstr(plan_error_last()->message, "3 hosts"));
  plan_search_info_clear(&info);
}

/* plan_search makes what `plan search -o` writes: the same plan and
 * provenance hashes. */
static void test_same_as_tool(void **state) {
  (void)state;
  static const char *const strategies[] = {"megatron", "greedy"};
  for (int i = 0; i < 2; i++) {
    plan_search_info info = PLAN_SEARCH_INFO_INIT;
    plan_plan *p = search(strategies[i], &info);
    assert_int_equal(info.strategy_ran, 1);
    assert_true(info.step_seconds > 0);
    assert_true(info.memory_bytes > 0);
    assert_true(info.cost_evaluations > 0);
    assert_null(info.details);
    plan_search_info_clear(&info);
    /* saved and read back, it is the same plan */
    char name[64];
    snprintf(name, sizeof name, "api-%s.yaml", strategies[i]);
    assert_int_equal(plan_save(p, path_in_tmp(name), NULL), PLAN_OK);
    plan_plan *q = load(path_in_tmp(name));
    assert_true(plan_hash_equal(hash_of(p, PLAN_PART_PLAN),
                                hash_of(q, PLAN_PART_PLAN)));
    assert_true(plan_hash_equal(hash_of(p, PLAN_PART_PROVENANCE),
                                hash_of(q, PLAN_PART_PROVENANCE)));
    plan_free(q);
    if (!tool[0]) {
      plan_free(p);
      skip(); /* no tool to compare with */
    }
    snprintf(name, sizeof name, "tool-%s.yaml", strategies[i]);
    const char *args[] = {"search", PROGRAM,           "--mesh",
                          MESH,     "--strategy",      strategies[i],
                          "-o",     path_in_tmp(name), NULL};
    assert_int_equal(run_tool(args), 0);
    q = load(path_in_tmp(name));
    assert_true(plan_hash_equal(hash_of(p, PLAN_PART_PLAN),
                                hash_of(q, PLAN_PART_PLAN)));
    assert_true(plan_hash_equal(hash_of(p, PLAN_PART_PROVENANCE),
                                hash_of(q, PLAN_PART_PROVENANCE)));
    plan_free(q);
    plan_free(p);
  }
}

/* The replay of a searched plan is the same; a tampered one differs. */
static void test_replay(void **state) {
  (void)state;
  plan_plan *p = search("megatron", NULL);
  const char *path = path_in_tmp("replay.yaml");
  assert_int_equal(plan_save(p, path, NULL), PLAN_OK);
  plan_replay_result *r = NULL;
  plan_search_info info = PLAN_SEARCH_INFO_INIT;
  assert_int_equal(plan_replay(&r, &info, path), PLAN_OK);
  assert_int_equal(r->same, 1);
  assert_true(plan_hash_equal(r->recorded, r->replayed));
  assert_true(plan_hash_equal(r->recorded, hash_of(p, PLAN_PART_PLAN)));
  assert_string_equal(r->strategy, "megatron");
  assert_null(r->diff);
  assert_null(r->note);
  assert_non_null(r->plan);
  assert_int_equal(info.strategy_ran, 1);
  plan_replay_result_free(r);
  plan_search_info_clear(&info);
  plan_free(p);

  /* a strategy changed by hand: from memory, the program found beside */
  size_t len;
  char *text = read_text(path, &len);
  const char *want = "mlp.act: {in: [S(0)S(1)], out: S(0)S(1)}";
  char *at = strstr(text, want);
  assert_non_null(at);
  memcpy(at, "mlp.act: {in: [RR],       out: RR      }", strlen(want));
  assert_int_equal(
      plan_replay_buffer(&r, &info, text, len, "tampered.yaml", tmp), PLAN_OK);
  assert_int_equal(r->same, 0);
  assert_false(plan_hash_equal(r->recorded, r->replayed));
  assert_non_null(r->diff);
  assert_non_null(strstr(r->diff, "mlp.act"));
  assert_int_equal(r->diff[strlen(r->diff) - 1], '\n');
  plan_replay_result_free(r);
  plan_search_info_clear(&info);
  free(text);

  /* a plan whose provenance records no search */
  r = (plan_replay_result *)&info;
  assert_int_equal(plan_replay(&r, &info, "examples/moe-experts.plan.yaml"),
                   PLAN_ENOTFOUND);
  assert_null(r);
  assert_int_equal(info.strategy_ran, 0);
  assert_non_null(strstr(plan_error_last()->message, "no search"));
  plan_search_info_clear(&info);
}

static void test_bad_strategy(void **state) {
  (void)state;
  plan_search_options o = PLAN_SEARCH_OPTIONS_INIT;
  o.mesh = MESH;
  o.strategy = "nope";
  plan_search_info info = PLAN_SEARCH_INFO_INIT;
  plan_plan *p = NULL;
  assert_int_equal(plan_search(&p, &info, PROGRAM, &o), PLAN_ENOTFOUND);
  assert_null(p);
  assert_int_equal(plan_error_last()->code, PLAN_ENOTFOUND);
  assert_non_null(strstr(plan_error_last()->message, "no strategy 'nope'"));
  assert_int_equal(info.strategy_ran, 0);
  assert_non_null(info.details);
  plan_search_info_clear(&info);
  assert_null(info.details);
  /* a strategy file that is not there, one that does not compile */
  o.strategy = path_in_tmp("none.lua");
  assert_int_equal(plan_search(&p, NULL, PROGRAM, &o), PLAN_EIO);
  o.strategy = path_in_tmp("broken.lua");
  write_text(o.strategy, "return function(p, opts\n");
  assert_int_equal(plan_search(&p, NULL, PROGRAM, &o), PLAN_ESYNTAX);
  assert_string_equal(plan_error_last()->file, o.strategy);
  assert_int_equal(plan_error_last()->line, 2);
}

/* A strategy that raises: its file and line, the traceback as text. */
static void test_strategy_raises(void **state) {
  (void)state;
  plan_search_options o = PLAN_SEARCH_OPTIONS_INIT;
  o.mesh = MESH;
  o.strategy = path_in_tmp("fails.lua");
  write_text(o.strategy, "return function(p, opts)\n"
                         "  error(\"gave up\")\n"
                         "end\n");
  plan_search_info info = PLAN_SEARCH_INFO_INIT;
  plan_plan *p = NULL;
  for (int i = 0; i < 3; i++) { /* again and again: nothing stays behind */
    assert_int_equal(plan_search(&p, &info, PROGRAM, &o), PLAN_EINVALID);
    assert_null(p);
    const plan_error *e = plan_error_last();
    assert_string_equal(e->file, o.strategy);
    assert_int_equal(e->line, 2);
    assert_string_equal(e->message, "gave up");
    assert_int_equal(info.strategy_ran, 1);
    assert_non_null(info.details);
    assert_non_null(strstr(info.details, "gave up\nstack traceback:"));
  }
  plan_search_info_clear(&info);
}

static void test_input_errors(void **state) {
  (void)state;
  plan_plan *p = NULL;
  plan_search_options o = PLAN_SEARCH_OPTIONS_INIT;
  /* a program needs a mesh */
  assert_int_equal(plan_search(&p, NULL, PROGRAM, &o), PLAN_EUSAGE);
  /* a file that is not there */
  const char *missing = path_in_tmp("missing.yaml");
  assert_int_equal(plan_search(&p, NULL, missing, NULL), PLAN_EIO);
  assert_string_equal(plan_error_last()->file, missing);
  plan_replay_result *r = NULL;
  assert_int_equal(plan_replay(&r, NULL, missing), PLAN_EIO);
  /* a bad mesh: the reader's position, or the shape check */
  o.mesh = "dp=0";
  assert_int_equal(plan_search(&p, NULL, PROGRAM, &o), PLAN_EINVALID);
  assert_true(plan_error_last()->line > 0);
  o.mesh = "dp:2";
  assert_int_equal(plan_search(&p, NULL, PROGRAM, &o), PLAN_EUSAGE);
  assert_null(p);
}

/* A program in memory comes out inline, with the same plan hash. */
static void test_buffer(void **state) {
  (void)state;
  plan_plan *a = search("megatron", NULL);
  size_t len;
  char *text = read_text(PROGRAM, &len);
  plan_search_options o = PLAN_SEARCH_OPTIONS_INIT;
  o.strategy = "megatron";
  o.mesh = MESH;
  plan_plan *b = NULL;
  assert_int_equal(
      plan_search_buffer(&b, NULL, text, len, "mlp.yaml", NULL, &o), PLAN_OK);
  assert_true(
      plan_hash_equal(hash_of(a, PLAN_PART_PLAN), hash_of(b, PLAN_PART_PLAN)));
  free(text);
  plan_free(b);
  plan_free(a);
}

/* A file strategy, self-contained: its script travels in the provenance,
 * so the plan replays without the file, when told to trust it. */
static void test_self_contained(void **state) {
  (void)state;
  plan_search_options o = PLAN_SEARCH_OPTIONS_INIT;
  o.mesh = "dp=2";
  o.strategy = path_in_tmp("all-r.lua");
  o.self_contained = 1;
  o.seed = 7;
  write_text(o.strategy, "local util = ...\n"
                         "return function(p, opts)\n"
                         "  local placed = {}\n"
                         "  for _, name in ipairs(p:ops()) do\n"
                         "    local op = p:op(name)\n"
                         "    if not p:pinned(name) then\n"
                         "      p:apply(name, p:strategies(name)[1])\n"
                         "    end\n"
                         "    util.record(p, op, p:strategy(name), placed)\n"
                         "  end\n"
                         "  return placed\n"
                         "end\n");
  plan_plan *p = NULL;
  assert_int_equal(plan_search(&p, NULL, PROGRAM, &o), PLAN_OK);
  assert_int_equal(unlink(o.strategy), 0);
  plan_write_options w = PLAN_WRITE_OPTIONS_INIT;
  w.self_contained = 1;
  char *text;
  size_t len;
  assert_int_equal(plan_write_buffer(&text, &len, p, &w), PLAN_OK);
  plan_replay_result *r = NULL;
  /* the script it carries runs only when trusted (then in the sandbox) */
  plan_search_info info = PLAN_SEARCH_INFO_INIT;
  assert_int_equal(plan_replay_buffer(&r, &info, text, len, "sc.yaml", NULL),
                   PLAN_EUSAGE);
  assert_null(r);
  assert_int_equal(info.strategy_ran, 0);
  assert_non_null(
      strstr(plan_error_last()->message, "--trust-embedded-script"));
  plan_search_info_clear(&info);
  plan_replay_options ro;
  assert_int_equal(plan_replay_options_init(&ro, PLAN_REPLAY_OPTIONS_VERSION),
                   PLAN_OK);
  ro.trust_embedded_script = 1;
  assert_int_equal(
      plan_replay_buffer_ext(&r, NULL, text, len, "sc.yaml", NULL, &ro),
      PLAN_OK);
  assert_int_equal(r->same, 1);
  assert_true(plan_hash_equal(r->replayed, hash_of(p, PLAN_PART_PLAN)));
  plan_replay_result_free(r);
  /* a file named instead: only with the recorded hash */
  ro.trust_embedded_script = 0;
  ro.strategy = path_in_tmp("other.lua");
  write_text(ro.strategy, "return function(p) return {} end\n");
  r = NULL;
  assert_int_equal(
      plan_replay_buffer_ext(&r, NULL, text, len, "sc.yaml", NULL, &ro),
      PLAN_EINVALID);
  assert_null(r);
  assert_non_null(strstr(plan_error_last()->message, "is not the script"));
  assert_int_equal(unlink(ro.strategy), 0);
  ro.version = 99;
  assert_int_equal(
      plan_replay_buffer_ext(&r, NULL, text, len, "sc.yaml", NULL, &ro),
      PLAN_EUSAGE);
  assert_int_equal(plan_replay_options_init(&ro, 99), PLAN_EUSAGE);
  free(text);
  plan_free(p);
}

/* The strategies' notes come back as text; nothing is printed. */
static void test_notes(void **state) {
  (void)state;
  plan_search_options o = PLAN_SEARCH_OPTIONS_INIT;
  o.mesh = MESH;
  o.strategy = "dp";
  o.limit = 1;
  plan_search_info info = PLAN_SEARCH_INFO_INIT;
  plan_plan *p = NULL;
  assert_int_equal(plan_search(&p, &info, PROGRAM, &o), PLAN_OK);
  assert_non_null(info.notes);
  assert_int_equal(strncmp(info.notes, "dp: note: more than 1 states", 28), 0);
  assert_int_equal(info.notes[strlen(info.notes) - 1], '\n');
  plan_search_info_clear(&info);
  plan_free(p);
}

static int setup(void **state) {
  (void)state;
  snprintf(tmp, sizeof tmp, "/tmp/libplan-search-XXXXXX");
  return mkdtemp(tmp) ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
  return system(cmd) == 0 ? 0 : -1;
}

int main(int argc, char **argv) {
  (void)argc;
  find_tool(argv[0]);
  /* the searched plans are saved in a temporary folder and name the
   * repository's example programs: a root that holds both */
  setenv("PLAN_PROGRAM_ROOT", "/", 1);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_options_init),
      cmocka_unit_test(test_joint),
      cmocka_unit_test(test_same_as_tool),
      cmocka_unit_test(test_replay),
      cmocka_unit_test(test_bad_strategy),
      cmocka_unit_test(test_strategy_raises),
      cmocka_unit_test(test_input_errors),
      cmocka_unit_test(test_buffer),
      cmocka_unit_test(test_self_contained),
      cmocka_unit_test(test_notes),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
