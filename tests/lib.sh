# The helpers the shell tests of the `plan` tool share (sourced, not run).
#
#   plan=PATH/TO/plan; . "$root/tests/lib.sh"; lib_init NAME
#
# lib_init makes a temporary folder $tmp (removed on exit) with $out and $err
# for the tool's output, and zeroes the counts; lib_report prints
# "NAME: N passed, M failed" and returns non-zero when anything failed.
# Every run of the tool is bounded by `timeout`: RUN_SECONDS (default 120)
# for `run` and `expect`, the given seconds for `expect_in`. Standard input
# is /dev/null, so a run that would read it ends at once.

lib_init() { # NAME
  lib_suite=$1
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/libplan-$1.XXXXXX") || exit 2
  trap 'rm -rf "$tmp"' EXIT INT TERM
  passed=0
  failed=0
  out=$tmp/out
  err=$tmp/err
}

ok() { passed=$((passed + 1)); }

bad() { # MESSAGE: counts a failure and shows the last run's output
  failed=$((failed + 1))
  echo "FAIL: $*"
  if [ -s "$out" ]; then echo "  stdout:"; sed -n '1,8s/^/    /p' "$out"; fi
  if [ -s "$err" ]; then echo "  stderr:"; sed -n '1,8s/^/    /p' "$err"; fi
}

run_in() { # SECONDS ARGS...: the tool within SECONDS, output captured; sets $rc
  lib_secs=$1
  shift
  timeout "$lib_secs" "$plan" "$@" >"$out" 2>"$err" </dev/null
  rc=$?
}

run() { run_in "${RUN_SECONDS:-120}" "$@"; } # ARGS...: the same, RUN_SECONDS

expect_in() { # RC NAME SECONDS ARGS...: the tool exits with RC within SECONDS
  lib_want=$1 lib_name=$2
  shift 2
  run_in "$@"
  if [ "$rc" -eq "$lib_want" ]; then ok; else bad "$lib_name: exit $rc, wanted $lib_want"; fi
}

expect() { # RC NAME ARGS...: the same within RUN_SECONDS
  lib_rc=$1 lib_nm=$2
  shift 2
  expect_in "$lib_rc" "$lib_nm" "${RUN_SECONDS:-120}" "$@"
}

has() { # FILE TEXT NAME: FILE contains the fixed string TEXT
  if grep -F -e "$2" "$1" >/dev/null 2>&1; then ok; else bad "$3: no '$2' in $(basename "$1")"; fi
}

lacks() { # FILE TEXT NAME: FILE does not contain TEXT
  if grep -F -e "$2" "$1" >/dev/null 2>&1; then bad "$3: unexpected '$2' in $(basename "$1")"; else ok; fi
}

same() { # FILE1 FILE2 NAME: the files are byte for byte equal
  if cmp -s "$1" "$2"; then ok; else bad "$3: $(basename "$1") and $(basename "$2") differ"; fi
}

absent() { # PATH NAME: nothing exists at PATH
  if [ -e "$1" ]; then bad "$2: $1 exists"; else ok; fi
}

check() { # NAME COMMAND...: the command succeeds
  lib_name=$1
  shift
  if "$@"; then ok; else bad "$lib_name"; fi
}

lib_report() {
  echo "$lib_suite: $passed passed, $failed failed"
  [ "$failed" -eq 0 ]
}
