#!/bin/sh
# The schedules a plan file cannot name yet (looped-bfs, interleaved-zb,
# zbv, dualpipev): `plan schedule --schedule NAME` runs each on a plan's
# stages; the grid it writes (--format yaml) pastes into the plan as an
# explicit schedule, which verifies EQUAL in both modes (looped-bfs and
# interleaved-zb: their stages sit s mod R, as a 1.0 grid places them);
# the V-placed zbv and dualpipev are refused on one stage per rank.
#
# usage: sh tests/cli/schedules.sh PATH/TO/plan
# Prints "cli-schedules: N passed, M failed"; exits non-zero on a failure.

plan=${1:?usage: schedules.sh PATH/TO/plan}
case $plan in /*) ;; *) plan=$(pwd)/$plan ;; esac
root=$(cd "$(dirname "$0")/../.." && pwd)
. "$root/tests/lib.sh"
lib_init cli-schedules

base=$root/examples/transformer4-interleaved.plan.yaml # 4 stages on pp=2

for k in looped-bfs interleaved-zb zbv dualpipev; do
  expect 0 "schedule --schedule $k" schedule --schedule $k --microbatches 8 "$base"
  has "$out" "makespan" "schedule --schedule $k"
done

for k in looped-bfs interleaved-zb; do
  expect 0 "schedule --schedule $k --format yaml" schedule --schedule $k \
    --format yaml "$base"
  awk '/^grid:/ { g = 1; print "  grid:"; next }
       g && /^  - / { print "  " $0; next }
       g { g = 0 }' "$out" >"$tmp/$k.grid"
  check "$k: the grid has a row per rank" [ "$(wc -l <"$tmp/$k.grid")" -eq 3 ]
  sed 's/^  schedule: interleaved-1f1b$/  schedule: explicit/' "$base" |
    awk -v gf="$tmp/$k.grid" '{ print }
      /^  schedule: explicit$/ { while ((getline l < gf) > 0) print l }' \
      >"$tmp/$k.plan.yaml"
  expect 0 "validate the $k grid" validate "$tmp/$k.plan.yaml"
  for mode in exact float; do
    expect 0 "verify the $k grid ($mode)" verify --mode $mode "$tmp/$k.plan.yaml"
    has "$out" "EQUAL (" "verify the $k grid ($mode)"
    has "$out" "explicit" "verify the $k grid ($mode)"
  done
done

# one stage per rank: the V schedules need two
one=$root/examples/pipeline-1f1b.plan.yaml
for k in zbv dualpipev; do
  expect 2 "schedule --schedule $k, one stage per rank" schedule --schedule $k "$one"
  has "$err" "two stages per rank" "schedule --schedule $k, one stage per rank"
done

lib_report
