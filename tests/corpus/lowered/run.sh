#!/bin/sh
# The lowered-program bug corpus: each file's first line says what
# `plan verify` must answer:
#   # expect: not-equal WHAT [DIAGNOSIS WORDS]  exit 1, the first divergent op
#                                               (or tensor) is WHAT, and the
#                                               report names the diagnosis;
#                                               WHAT `schedule`: a pipeline's
#                                               schedule did not finish
#   # expect: exit 2 MESSAGE WORDS              a malformed lowered program
# usage: tests/corpus/lowered/run.sh PLAN_BINARY
PLAN=${1:?usage: run.sh PLAN_BINARY}
DIR=$(cd "$(dirname "$0")" && pwd)
passed=0; failed=0
for f in "$DIR"/*.yaml; do
  want=$(head -n 1 "$f" | sed 's/^# expect: //')
  case $want in
    not-equal*)
      # the same answer in both modes
      rest=${want#not-equal }
      what=${rest%% *}; words=${rest#"$what"}; words=${words# }
      for mode in exact float; do
        out=$(timeout 20 "$PLAN" verify --mode $mode "$f" 2>&1); rc=$?
        if [ "$rc" -eq 1 ] && printf '%s' "$out" | grep -q "first divergent op: .*$what\|tensor '$what'\|^the $what did not finish" &&
           { [ -z "$words" ] || printf '%s' "$out" | grep -qF "$words"; }; then
          passed=$((passed+1))
        else
          failed=$((failed+1)); echo "FAIL: $(basename "$f") ($mode mode): wanted $want, got exit $rc:"; echo "$out"
        fi
      done ;;
    exit\ 2*)
      words=${want#exit 2 }
      out=$(timeout 20 "$PLAN" verify "$f" 2>&1); rc=$?
      if [ "$rc" -eq 2 ] && printf '%s' "$out" | grep -qF "$words" &&
         printf '%s' "$out" | grep -q "$(basename "$f"):[0-9]*:[0-9]*: error:"; then
        passed=$((passed+1))
      else
        failed=$((failed+1)); echo "FAIL: $(basename "$f"): wanted $want, got exit $rc:"; echo "$out"
      fi ;;
    *) failed=$((failed+1)); echo "FAIL: $(basename "$f"): bad expect line" ;;
  esac
done
echo "lowered corpus: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
