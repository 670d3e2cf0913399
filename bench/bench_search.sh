#!/bin/sh
# The search benchmark: a fixed table of Llama-style programs (bench/
# gen_plan.py: 8 and 32 layers) on dp x tp = 2x4 and 8x8 and dp x tp x pp
# = 2x4x2 and 4x8x4 (1F1B, 2 pp microbatches per stage), H100 profile,
# searched with megatron, greedy, beam and dp (dp with --limit 16: a
# bounded search; exact on small graphs, see docs/lua.md). For each: the
# modeled step time and peak memory per device of the plan found, the cost
# evaluations made from Lua and their rate, and the wall time of the whole
# `plan search` (load, search, validate, cost, save).
#
# usage: bench/bench_search.sh [BUILD_DIR]   (default: build)
set -eu
BUILD=${1:-build}
HERE=$(cd "$(dirname "$0")" && pwd)
TOOL=$BUILD/plan
OUT=$HERE/out/search
mkdir -p "$OUT"
now() { date +%s.%N; }
printf '%-7s %-6s %-9s %12s %10s %10s %12s %9s\n' layers mesh strategy \
  "step (ms)" "mem (GiB)" "evals" "evals/s" "wall (s)"
for layers in 8 32; do
  for mesh in "2 4 1" "8 8 1" "2 4 2" "4 8 4"; do
    set -- $mesh
    name=$1x$2
    [ "$3" -gt 1 ] && name=$name"x$3"
    plan=$OUT/llama-$layers-$name.yaml
    [ -s "$plan" ] || python3 "$HERE/gen_plan.py" --layers "$layers" --dp "$1" \
      --tp "$2" --pp "$3" -o "$plan" >/dev/null 2>&1
    for s in megatron greedy beam dp; do
      extra=""
      [ "$s" = dp ] && extra="--limit 16"
      t0=$(now)
      # shellcheck disable=SC2086
      line=$("$TOOL" search "$plan" --strategy "$s" --hardware h100 $extra \
             -o "$OUT/found.yaml" 2>/dev/null | tail -n 1) || line=FAILED
      t1=$(now)
      step=$(printf '%s' "$line" | sed -n 's/.*modeled step \([0-9.]*\) ms.*/\1/p')
      mem=$(printf '%s' "$line" | sed -n 's/.*peak memory \([0-9.]*\) GiB.*/\1/p')
      evals=$(printf '%s' "$line" | sed -n 's/.*; \([0-9]*\) cost evaluations.*/\1/p')
      rate=$(printf '%s' "$line" | sed -n 's/.*(\([0-9]*\)\/s).*/\1/p')
      printf '%-7s %-6s %-9s %12s %10s %10s %12s %9.2f\n' "$layers" "$name" "$s" \
        "${step:-FAILED}" "${mem:--}" "${evals:--}" "${rate:--}" \
        "$(awk "BEGIN { print $t1 - $t0 }")"
    done
  done
done
