#!/bin/sh
# Runs the make targets given, one after another, stopping at the first
# that fails, and prints each one's wall-clock seconds, then a table of
# them all: make test's order of suites, and where its time goes.
# Usage: tests/suites.sh TARGET...   (MAKE: the make to run, default make;
# JOBS: parallel jobs for each suite's prerequisites, default 2: one goal
# per make, so only the builds run in parallel, never two suites)
make=${MAKE:-make}
jobs=${JOBS:-2}
times=""
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
echo "suites: seconds per suite"
printf '%s' "$times" | sort -k2 -n -r | awk '{printf "  %-24s %5d\n", $1, $2}'
