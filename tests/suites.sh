#!/bin/sh
# Runs the make targets given and prints each one's wall-clock seconds,
# then a table of them all: make test's suites, and where its time goes.
# Usage: tests/suites.sh TARGET...   (MAKE: the make to run, default make;
# JOBS: parallel jobs for each suite's make, default 2; SUITE_JOBS: suites
# run at once, default 1)
#
# SUITE_JOBS=1: one after another in the order given, output as it comes,
# stopping at the first that fails.
# SUITE_JOBS=N > 1: N at a time, started in the order given; each suite's
# output is kept apart and printed whole, in the order given, as soon as it
# and every suite before it are done. After a failure no new suite starts;
# those running finish and are printed; the exit status is 1. The suites
# must then share nothing they write: make test builds everything first
# (its suites-build), so that no two suites' makes build the same file.
make=${MAKE:-make}
jobs=${JOBS:-2}
par=${SUITE_JOBS:-1}
case $par in '' | *[!0-9]* | 0) echo "suites: SUITE_JOBS must be a positive number, not '$par'" >&2; exit 2 ;; esac
times=""
t0=$(date +%s)

table() {
  echo "suites: seconds per suite ($(($(date +%s) - t0)) s in all, $par at a time)"
  printf '%s' "$times" | sort -k2 -n -r | awk '{printf "  %-24s %5d\n", $1, $2}'
}

if [ "$par" -eq 1 ]; then
  for t in "$@"; do
    start=$(date +%s)
    if ! $make --no-print-directory -j"$jobs" "$t"; then
      echo "suites: $t FAILED after $(($(date +%s) - start)) s" >&2
      exit 1
    fi
    s=$(($(date +%s) - start))
    times="$times$t $s
"
    echo "suite $t: $s s"
  done
  table
  exit 0
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/libplan-suites.XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM

# Suite number i runs in the background: its output in $tmp/i.log, then
# "STATUS SECONDS" in $tmp/i.done, written whole (a rename) when it ends.
start_suite() {
  (
    start=$(date +%s)
    $make --no-print-directory -j"$jobs" "$2" >"$tmp/$1.log" 2>&1
    rc=$?
    echo "$rc $(($(date +%s) - start))" >"$tmp/$1.tmp"
    mv "$tmp/$1.tmp" "$tmp/$1.done"
  ) &
}

n=$#
started=0 # suites started: 1..started
printed=0 # suites printed, in order: 1..printed
failed=""
while [ "$printed" -lt "$started" ] || { [ -z "$failed" ] && [ "$started" -lt "$n" ]; }; do
  # print, in order, every suite that is done and has all before it done
  while [ "$printed" -lt "$started" ] && [ -f "$tmp/$((printed + 1)).done" ]; do
    printed=$((printed + 1))
    eval "t=\${$printed}"
    read -r rc s <"$tmp/$printed.done"
    echo "==== suite $t"
    cat "$tmp/$printed.log"
    if [ "$rc" -ne 0 ]; then
      echo "suites: $t FAILED after $s s" >&2
      case " $failed " in *" $t "*) ;; *) failed="$failed $t" ;; esac
    else
      echo "suite $t: $s s"
    fi
    times="$times$t $s
"
  done
  # the number running: started and not done
  running=0
  i=$printed
  while [ "$i" -lt "$started" ]; do
    i=$((i + 1))
    [ -f "$tmp/$i.done" ] || running=$((running + 1))
  done
  # a failure seen among those running stops new starts too
  i=$printed
  while [ "$i" -lt "$started" ]; do
    i=$((i + 1))
    eval "t=\${$i}"
    case " $failed " in *" $t "*) continue ;; esac
    if [ -f "$tmp/$i.done" ] && [ "$(cut -d' ' -f1 "$tmp/$i.done")" != 0 ]; then
      failed="$failed $t"
    fi
  done
  if [ -z "$failed" ] && [ "$running" -lt "$par" ] && [ "$started" -lt "$n" ]; then
    started=$((started + 1))
    eval "start_suite $started \"\${$started}\""
    continue
  fi
  sleep 0.5 2>/dev/null || sleep 1
done
wait
table
if [ -n "$failed" ]; then
  echo "suites: FAILED:$failed" >&2
  exit 1
fi
