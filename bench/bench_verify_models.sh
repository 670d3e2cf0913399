#!/bin/sh
# The verify target: `plan verify --reduce` of every model example
# (examples/models/*.plan.yaml), whole (load, reduce, lower, both runs,
# the comparisons), in exact mode (the default) and float mode, under 5 s
# each. Prints a table: model, then per mode the verdict, the processor
# seconds (user + system: the figure the target is judged on, as on a
# shared machine the wall time is mostly waiting) and the wall seconds,
# and whether both modes are EQUAL and under the target; exits 1 when one
# is not.
#
# usage: bench/bench_verify_models.sh [BUILD_DIR]   (default: build)
#   VERIFY_TARGET_S  the target in seconds (default 5)
set -u
BUILD=${1:-build}
HERE=$(cd "$(dirname "$0")" && pwd)
TOOL=$BUILD/plan
TARGET=${VERIFY_TARGET_S:-5}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
printf '%-32s %-9s %7s %7s  %-9s %7s %7s  %s\n' model exact "cpu s" "wall s" \
  float "cpu s" "wall s" "< $TARGET s"
over=0
for f in "$HERE"/../examples/models/*.plan.yaml; do
  name=$(basename "$f" .plan.yaml)
  row=$(printf '%-32s' "$name")
  ok=yes
  for mode in exact float; do
    /usr/bin/time -f '%e %U %S' -o "$TMP/t" \
      "$TOOL" verify --reduce --mode "$mode" "$f" >/dev/null 2>&1
    rc=$?
    set -- $(tail -n 1 "$TMP/t")
    wall=$1 cpu=$(echo "$2 + $3" | bc)
    case $rc in 0) v=EQUAL ;; 1) v="NOT-EQUAL" ;; *) v="exit-$rc" ;; esac
    [ "$rc" = 0 ] || ok=no
    [ "$(echo "$cpu < $TARGET" | bc)" = 1 ] || ok=no
    row=$(printf '%s %-9s %7.2f %7.2f ' "$row" "$v" "$cpu" "$wall")
  done
  [ $ok = yes ] || over=$((over + 1))
  printf '%s %s\n' "$row" "$ok"
done
echo "verify --reduce of every model: $over not EQUAL or over $TARGET s"
[ "$over" -eq 0 ]
